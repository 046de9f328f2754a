"""Engine drivers: the reference engine over a workload, its memory counted by ``harness.memory``.

``simulate`` (vLLM's start-up and every serving step on a simulated device, with ``replay`` and
``plot``), ``scaling`` (what grows with ``num_blocks``), ``workload``, ``cli`` (``harness memory``)
and ``pytest_plugin`` (``harness_simulate``). The loop itself is :mod:`harness.reference.engine`.
"""
