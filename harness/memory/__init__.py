"""Memory budgets: account tensor memory on CPU/meta, simulate GPU capacities, probe real CUDA.

Modules (one concept each), in the order ``harness memory simulate`` uses them:

- ``cli``: the ``harness memory`` subcommands (parse, call the library, print);
- ``workload`` (request lengths), ``engine_config`` (workload + model -> ``VllmConfig``);
- ``simulate``: vLLM's start-up and every serving step on a simulated device;
- ``sizing``: vLLM's KV cache sizing, in vLLM's order;
- ``tracker`` (every storage an aten op creates, as allocation events, in every thread it covers;
  ``threads`` carries it into other threads), ``allocation`` (what an event carries and its
  source line), ``replay`` (identical decoder layers replayed from one recording);
- ``ledger``: the one account of those events: live bytes, peak, regions, bytes by source line;
- ``sim_allocator``: a simulated CUDA caching allocator, the ledger's capacity policy;
- ``devices`` (named GPU profiles), ``sizes`` (parse/format byte sizes), ``plot`` (the PNG);
- ``scaling``: which allocations grow with ``num_blocks``;
- ``cuda_probe`` (real-GPU measurements that fail closed), ``marks``/``pytest_plugin`` (the
  ``memory_budget`` pytest marker).

This package sits below the regression catalog: it never imports ``harness.regressions``; callers
hand it backend classes.
"""
