"""FlashAttention-style backend (vLLM 0.9.0 ``vllm/v1/attention/backends/flash_attn.py``).

KV cache ``(2, num_blocks, block_size, num_kv_heads, head_size)`` with a block size that is a
multiple of 16 and head sizes FlashAttention supports (vLLM's checks and messages); metadata is the
block table plus per-request lengths, with an optional cascade split for a prefix every request
shares. The builder is the only one that writes its group's device slot-mapping buffer (as 0.9.0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from harness.reference.backends.abstract import (
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
)
from harness.reference.backends.utils import copy_slot_mapping
from harness.reference.common_metadata import CommonAttentionMetadata
from harness.reference.kv_cache_interface import cdiv
from harness.reference.oracle import merge_attn_states, paged_attention, reshape_and_cache


class FlashAttentionBackend(AttentionBackend):
    """FlashAttention: K and V as two halves of one tensor, blocks in the second dimension."""

    @staticmethod
    def get_supported_head_sizes() -> list[int]:
        return [32, 64, 96, 128, 160, 192, 224, 256]

    @staticmethod
    def get_name() -> str:
        return "FLASH_ATTN_VLLM_V1"

    @staticmethod
    def get_kv_cache_shape(
        num_blocks: int, block_size: int, num_kv_heads: int, head_size: int
    ) -> tuple[int, ...]:
        if block_size % 16 != 0:
            raise ValueError("Block size must be a multiple of 16.")
        return (2, num_blocks, block_size, num_kv_heads, head_size)

    @staticmethod
    def get_builder_cls() -> type[FlashAttentionMetadataBuilder]:
        return FlashAttentionMetadataBuilder

    @staticmethod
    def get_metadata_cls() -> type[FlashAttentionMetadata]:
        return FlashAttentionMetadata

    @staticmethod
    def get_impl_cls() -> type[FlashAttentionImpl]:
        return FlashAttentionImpl


@dataclass
class FlashAttentionMetadata:
    """One group's metadata for one step (vLLM's fields, minus AOT scheduling and local attn)."""

    num_actual_tokens: int
    """Scheduled tokens, without padding."""
    max_query_len: int
    query_start_loc: torch.Tensor
    """(num_reqs + 1,) int32: start of each request's query tokens."""
    max_seq_len: int
    """Longest sequence (computed + scheduled tokens)."""
    seq_lens: torch.Tensor
    """(num_reqs,) int32: tokens each request attends over."""
    block_table: torch.Tensor
    """(num_reqs, max_num_blocks_per_req) int32: the group's device block table rows."""
    slot_mapping: torch.Tensor
    """(num_actual_tokens,) int64: cache slot of each token (device buffer tail is -1)."""
    use_cascade: bool
    """Whether attention splits into a shared-prefix pass and a per-request suffix pass."""
    common_prefix_len: int
    """Tokens of the shared prefix (a multiple of the block size; 0 without cascade)."""
    cu_prefix_query_lens: torch.Tensor | None = None
    """(2,) int32 ``[0, num_actual_tokens]``: every token is one query of the prefix pass."""
    prefix_kv_lens: torch.Tensor | None = None
    """(1,) int32 ``[common_prefix_len]``: keys of the prefix pass."""
    suffix_kv_lens: torch.Tensor | None = None
    """(num_reqs,) int32: ``seq_lens - common_prefix_len``, keys of each request's suffix pass."""


def use_cascade_attention(
    common_prefix_len: int,
    query_lens: npt.NDArray[np.int32],
    num_query_heads: int,
    num_kv_heads: int,
    use_alibi: bool,
    use_sliding_window: bool,
    num_sms: int,
) -> bool:
    """vLLM's heuristic: is cascade attention faster than plain attention for this batch?

    Never under a 256-token prefix, with alibi, a sliding window or fewer than 8 requests; for
    all-decode batches with grouped queries, a wave-count model of 128x128 tiles on ``num_sms`` SMs.
    """
    if common_prefix_len < 256 or use_alibi or use_sliding_window:
        return False
    num_reqs = len(query_lens)
    if num_reqs < 8:
        return False
    num_queries_per_kv = num_query_heads // num_kv_heads
    use_flash_decoding = num_queries_per_kv > 1 and bool(np.all(query_lens == 1))
    if not use_flash_decoding:
        return True
    q_tile_size = kv_tile_size = 128
    num_prefix_tiles = cdiv(common_prefix_len, kv_tile_size)
    cascade_ctas = num_query_heads * cdiv(num_reqs, q_tile_size)
    cascade_time = cdiv(cascade_ctas, num_sms) * num_prefix_tiles
    flash_decoding_ctas = num_reqs * num_kv_heads * cdiv(num_queries_per_kv, q_tile_size)
    flash_decoding_time = cdiv(flash_decoding_ctas * num_prefix_tiles, num_sms)
    return cascade_time < flash_decoding_time


class FlashAttentionMetadataBuilder(AttentionMetadataBuilder[FlashAttentionMetadata]):
    """Copies the group's slot mapping to the device and computes the cascade split."""

    def build(
        self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata
    ) -> FlashAttentionMetadata:
        num_reqs = common_attn_metadata.num_reqs
        num_actual_tokens = common_attn_metadata.num_actual_tokens
        seq_lens_cpu = common_attn_metadata.seq_lens_cpu[:num_reqs]
        block_size = self.kv_cache_spec.block_size
        if common_prefix_len % block_size:
            raise ValueError(f"{common_prefix_len=} is not a multiple of {block_size=}")
        use_cascade = common_prefix_len > 0
        cu_prefix_query_lens = prefix_kv_lens = suffix_kv_lens = None
        if use_cascade:
            cu_prefix_query_lens = torch.tensor(
                [0, num_actual_tokens], dtype=torch.int32, device=self.device
            )
            prefix_kv_lens = torch.tensor(
                [common_prefix_len], dtype=torch.int32, device=self.device
            )
            suffix_kv_lens = (seq_lens_cpu - common_prefix_len).to(self.device, non_blocking=True)
        return FlashAttentionMetadata(
            num_actual_tokens=num_actual_tokens,
            max_query_len=common_attn_metadata.max_query_len,
            query_start_loc=common_attn_metadata.query_start_loc,
            max_seq_len=int(seq_lens_cpu.max()) if num_reqs else 0,
            seq_lens=common_attn_metadata.seq_lens,
            block_table=self.block_table.get_device_tensor()[:num_reqs],
            slot_mapping=copy_slot_mapping(self.block_table, num_actual_tokens),
            use_cascade=use_cascade,
            common_prefix_len=common_prefix_len,
            cu_prefix_query_lens=cu_prefix_query_lens,
            prefix_kv_lens=prefix_kv_lens,
            suffix_kv_lens=suffix_kv_lens,
        )

    def use_cascade_attention(self, *args: Any, **kwargs: Any) -> bool:
        return use_cascade_attention(*args, **kwargs)


def cascade_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    attn_metadata: FlashAttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """Shared prefix (non-causal, every token) + own suffix (causal), merged by log-sum-exp."""
    md = attn_metadata
    assert md.cu_prefix_query_lens is not None and md.prefix_kv_lens is not None
    assert md.suffix_kv_lens is not None
    num_common_kv_blocks = md.common_prefix_len // key_cache.shape[1]
    prefix_output, prefix_lse = paged_attention(
        query,
        key_cache,
        value_cache,
        query_start_loc=md.cu_prefix_query_lens,
        seq_lens=md.prefix_kv_lens,
        block_table=md.block_table[:1, :num_common_kv_blocks],
        scale=scale,
        causal=False,
    )
    suffix_output, suffix_lse = paged_attention(
        query,
        key_cache,
        value_cache,
        query_start_loc=md.query_start_loc,
        seq_lens=md.suffix_kv_lens,
        block_table=md.block_table[:, num_common_kv_blocks:],
        scale=scale,
    )
    return merge_attn_states(prefix_output, prefix_lse, suffix_output, suffix_lse)


class FlashAttentionImpl(AttentionImpl[FlashAttentionMetadata]):
    """Writes K/V through the slot mapping, then paged (or cascade) attention with the oracle."""

    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int,
        sliding_window: int | None = None,
    ) -> None:
        super().__init__(num_heads, head_size, scale, num_kv_heads, sliding_window)
        supported = FlashAttentionBackend.get_supported_head_sizes()
        if head_size not in supported:
            raise ValueError(
                f"Head size {head_size} is not supported by FlashAttention. Supported head sizes "
                f"are: {supported}. Set VLLM_USE_V1=0 to use another attention backend."
            )

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: FlashAttentionMetadata | None,
    ) -> torch.Tensor:
        output = self._empty_output(query)
        if attn_metadata is None or query.is_meta:
            return output
        key_cache, value_cache = kv_cache.unbind(0)
        reshape_and_cache(key, value, key_cache, value_cache, attn_metadata.slot_mapping)
        n = attn_metadata.num_actual_tokens
        if attn_metadata.use_cascade:
            if self.sliding_window is not None:
                raise ValueError("cascade attention does not support a sliding window")
            out = cascade_attention(query[:n], key_cache, value_cache, attn_metadata, self.scale)
        else:
            out, _ = paged_attention(
                query[:n],
                key_cache,
                value_cache,
                query_start_loc=attn_metadata.query_start_loc,
                seq_lens=attn_metadata.seq_lens,
                block_table=attn_metadata.block_table,
                scale=self.scale,
                sliding_window=self.sliding_window,
            )
        output[:n] = out.flatten(1)
        return output
