"""Memory accounting: count tensor memory on CPU/meta, simulate GPU capacities, probe real CUDA.

Modules (one concept each):

- ``tracker`` (every storage an aten op creates, as allocation events, in every thread it covers;
  ``threads`` carries it into other threads), ``allocation`` (what an event carries and its
  source line);
- ``ledger``: the one account of those events: live bytes, peak, regions, bytes by source line;
- ``sim_allocator``: a simulated CUDA caching allocator, the ledger's capacity policy;
- ``devices`` (named GPU profiles), ``sizes`` (parse/format byte sizes);
- ``cuda_probe`` (real-GPU measurements that fail closed), ``marks``/``pytest_plugin`` (the
  ``memory_budget`` pytest marker).

This package only counts: it imports nothing that runs the engine (``harness.reference``,
``harness.simulation``) or sits above it; the drivers are :mod:`harness.simulation`.
"""
