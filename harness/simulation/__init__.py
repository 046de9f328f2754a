"""Engine drivers: the reference engine over a workload, its memory counted by ``harness.memory``.

- ``workload`` (request lengths), and the ``VllmConfig`` it runs under;
- ``simulate``: vLLM's start-up and every serving step on a simulated device, ``replay`` (identical
  decoder layers replayed from one recording), ``plot`` (the PNG of a run);
- ``scaling``: which allocations grow with ``num_blocks``;
- ``cli`` (``harness memory simulate|scaling|devices``), ``pytest_plugin`` (``harness_simulate``).

The loop itself is :mod:`harness.reference.engine`; the catalog sits above this package.
"""
