"""Memory budgets: account tensor memory on CPU/meta, simulate GPU capacities, probe real CUDA.

Modules (one concept each): ``sizes`` (parse/format byte sizes), ``tracker`` (live storage bytes
under a ``TorchDispatchMode``), ``devices`` (named GPU capacity profiles), ``sim_allocator``
(a simulated CUDA caching allocator that raises torch-formatted out-of-memory errors),
``cuda_probe`` (real-GPU measurements that fail closed), ``marks``/``pytest_plugin`` (the
``memory_budget`` pytest marker).
"""
