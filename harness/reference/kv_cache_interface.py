"""KV cache specs and the KV cache config (vLLM 0.9.0 ``vllm/v1/kv_cache_interface.py``)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from harness.reference.config import VllmConfig


def cdiv(a: int, b: int) -> int:
    """Ceiling division."""
    return -(-a // b)


def get_dtype_size(dtype: torch.dtype) -> int:
    """Bytes per element of ``dtype``."""
    return torch.empty((), dtype=dtype, device="meta").element_size()


@dataclass
class KVCacheSpec:
    """How one attention layer stores its KV cache: the unit is a block of ``block_size`` tokens."""

    block_size: int

    @property
    def type_id(self) -> str:
        """Layers with the same ``type_id`` can share one KV cache group (one block table)."""
        raise NotImplementedError

    @property
    def page_size_bytes(self) -> int:
        """Bytes of one block of this layer."""
        raise NotImplementedError

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        """Most bytes one request of ``max_model_len`` tokens can occupy in this layer."""
        raise NotImplementedError

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> KVCacheSpec:
        """One spec standing for ``specs``, which must all share a ``type_id``.

        Different type ids raise ``AssertionError`` with vLLM's message (vLLM asserts).
        """
        if any(spec.type_id != specs[0].type_id for spec in specs[1:]):
            raise AssertionError(
                "All layers in the same KV cache group must share the same type_id."
            )
        return copy.deepcopy(specs[0])


@dataclass
class AttentionSpec(KVCacheSpec):
    """A paged attention layer: K and V (or one latent for MLA) per token per KV head."""

    num_kv_heads: int
    head_size: int
    dtype: torch.dtype
    use_mla: bool

    @property
    def page_size_bytes(self) -> int:
        # MLA stores one compressed latent per token; other attention stores K and V.
        coef = 1 if self.use_mla else 2
        return (
            coef * self.block_size * self.num_kv_heads * self.head_size * get_dtype_size(self.dtype)
        )


@dataclass
class FullAttentionSpec(AttentionSpec):
    """Causal attention over the whole sequence: a request keeps every block."""

    sliding_window: int | None = None
    """A sliding-window layer kept as full attention: with the hybrid KV cache manager disabled
    (vLLM 0.9.0's only mode) such a layer gets blocks for every token but still computes over its
    window. None for a true full-attention layer."""

    @property
    def type_id(self) -> str:
        return f"full_attention_{self.block_size}_{self.page_size_bytes}"

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        max_model_len = vllm_config.model_config.max_model_len
        return cdiv(max_model_len, self.block_size) * self.page_size_bytes

    @classmethod
    def merge(cls, specs: Sequence[KVCacheSpec]) -> FullAttentionSpec:
        """As ``KVCacheSpec.merge``, keeping the one sliding window the layers have, if any.

        ``Full(None) + Full(4)`` has window 4; two different windows raise ``ValueError``.
        """
        merged = super().merge(specs)
        assert isinstance(merged, FullAttentionSpec)  # one type_id: all full attention
        windows = {
            spec.sliding_window
            for spec in specs
            if isinstance(spec, FullAttentionSpec) and spec.sliding_window is not None
        }
        if len(windows) > 1:
            raise ValueError(
                "All sliding window layers in the same KV cache group must have the same "
                "window size."
            )
        merged.sliding_window = windows.pop() if windows else None
        return merged


@dataclass
class SlidingWindowSpec(AttentionSpec):
    """Attention over the last ``sliding_window`` tokens: older blocks can be freed."""

    sliding_window: int

    def __post_init__(self) -> None:
        if self.use_mla:
            raise AssertionError("MLA is not supported for sliding window")  # vLLM asserts

    @property
    def type_id(self) -> str:
        return f"sliding_window_{self.sliding_window}_{self.block_size}_{self.page_size_bytes}"

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        max_model_len = vllm_config.model_config.max_model_len
        max_num_batched_tokens = vllm_config.scheduler_config.max_num_batched_tokens
        # A chunk of max_num_batched_tokens can attend back sliding_window - 1 tokens; one
        # extra block because the window need not start at a block boundary.
        num_tokens = min(self.sliding_window - 1 + max_num_batched_tokens, max_model_len)
        return (cdiv(num_tokens, self.block_size) + 1) * self.page_size_bytes


@dataclass
class KVCacheTensor:
    """One layer's KV cache allocation."""

    size: int
    """Bytes of the tensor."""


@dataclass
class KVCacheGroupSpec:
    """Layers that share one block table (and one metadata builder)."""

    layer_names: list[str]
    kv_cache_spec: KVCacheSpec


@dataclass
class KVCacheConfig:
    """How the KV cache is laid out: blocks per layer, tensors per layer, and the groups."""

    num_blocks: int
    """Blocks in each layer's tensor; block ids are shared by all groups."""
    tensors: dict[str, KVCacheTensor]
    """Layer name -> its KV cache tensor."""
    kv_cache_groups: list[KVCacheGroupSpec]
