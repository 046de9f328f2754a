"""A small, faithful reference of vLLM V1's per-KV-cache-group attention design.

Names, defaults and values follow vLLM 0.9.0: one ``KVCacheSpec``, one ``BlockTable`` and one
``AttentionMetadataBuilder`` per KV cache group. What it keeps from a later vLLM on purpose (e.g.
``build(common_prefix_len, common_attn_metadata)``, block tables owning their slot mapping, the
hybrid KV cache manager behind ``disable_hybrid_kv_cache_manager=False``) is listed, with versions,
in ``docs/fidelity.md``; ``harness fidelity`` checks the rest against vLLM 0.9.0's source.
"""
