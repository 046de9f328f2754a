"""Memory accounting: count tensor memory on CPU/meta, simulate GPU capacities, probe real CUDA.

``tracker`` and ``threads`` (allocation events from aten ops, in every thread), ``allocation``,
``ledger`` (the one account), ``sim_allocator`` and ``devices`` (simulated GPUs), ``sizes``,
``cuda_probe``, ``marks`` and ``pytest_plugin`` (the ``memory_budget`` marker).
This package only counts: it imports nothing that runs the engine; the drivers are
:mod:`harness.simulation`.
"""
