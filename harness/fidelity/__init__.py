"""Differential tests of the reference against vLLM's own source text.

vLLM cannot be imported without CUDA, so :mod:`harness.fidelity.sandbox` loads the few vLLM modules
under comparison from their ``.py`` files, with small stubs standing in for the rest of vLLM (and
for ``flashinfer``), and never imports the installed ``vllm`` package. Each
:class:`~harness.fidelity.differential.Differential` draws random inputs from a fixed seed, runs
vLLM's code and the reference on each, compares the outcomes exactly, and shrinks the first
disagreement to a small input. ``harness fidelity --vllm-src DIR`` runs them all.
"""
