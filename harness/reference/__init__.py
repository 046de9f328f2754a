"""A small, faithful reference of vLLM V1's per-KV-cache-group attention design.

Names follow vLLM 0.9.0: one ``KVCacheSpec``, one ``BlockTable`` (owning its group's slot
mapping) and one ``AttentionMetadataBuilder`` per KV cache group.
"""
