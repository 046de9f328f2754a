"""Differential tests of the reference against vLLM's own source text.

:mod:`harness.fidelity.vllm` loads the compared vLLM modules from their ``.py`` files
(:mod:`harness.vllm_tree`) with stubs for the rest of vLLM; each :class:`~harness.fidelity.differential.Differential` runs both
sides on random inputs and compares exactly. ``harness fidelity --vllm-src DIR`` runs them all;
``docs/fidelity.md`` (Differential tests) describes the design.
"""
