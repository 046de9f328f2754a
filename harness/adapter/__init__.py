"""The engine adapter: a vLLM tree's own attention metadata builders, driven on the CPU.

A tree (a git checkout or a wheel's ``.py`` files, never the installed ``vllm``) is loaded by
:mod:`harness.vllm_tree` with the split of :mod:`~harness.adapter.stubs`, its backends found by
:mod:`~harness.adapter.backends`, each builder's API era read from its signatures
(:mod:`harness.vllm_tree.era`), and each builder constructed and driven over a generated serving
sequence (:mod:`~harness.adapter.sequence`) as that era's model runner does
(:mod:`~harness.adapter.drive`). The scaling detector and ``harness diff`` run on top.
"""
