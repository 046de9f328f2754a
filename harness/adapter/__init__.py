"""The engine adapter: a vLLM tree's own attention metadata builders, driven on the CPU.

A tree (a git checkout or a wheel's ``.py`` files, never the installed ``vllm``) is loaded by
:mod:`~harness.adapter.loader`, its backends found by :mod:`~harness.adapter.backends`, its API
era read from signatures (:mod:`~harness.adapter.era`), and each builder constructed and driven
over a generated serving sequence (:mod:`~harness.adapter.sequence`) as that era's model runner
does (:mod:`~harness.adapter.drive`). The scaling detector and ``harness diff`` run on top.
"""
