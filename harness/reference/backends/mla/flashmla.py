"""FlashMLA-style MLA backend (vLLM 0.9.0 ``vllm/v1/attention/backends/mla/flashmla.py``).

Its builder overrides ``_build_decode(block_table_tensor, seq_lens)`` to add FlashMLA's tile
scheduler metadata. :func:`get_mla_metadata` is a pure-Python stand-in for FlashMLA's
``get_mla_metadata`` CUDA kernel: the same greedy split of the decode work (64-token blocks plus a
fixed overhead per split) over SM partitions, with the same output shapes and dtypes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.reference.backends.mla.common import (
    MLACommonBackend,
    MLACommonDecodeMetadata,
    MLACommonMetadata,
    MLACommonMetadataBuilder,
)
from harness.reference.block_table import BlockTable
from harness.reference.config import VllmConfig
from harness.reference.kv_cache_interface import AttentionSpec, cdiv
from harness.reference.oracle import to_int_list

NUM_SMS = 132
"""SMs the stand-in schedules over (an H100 SXM)."""
TILE_SCHEDULER_METADATA_SIZE = 8
"""int32 words per SM partition in ``tile_scheduler_metadata``."""
BLOCK_SIZE_M = 64
"""Query heads per tile."""
BLOCK_SIZE_N = 64
"""KV tokens per scheduled block."""
FIXED_OVERHEAD_NUM_BLOCKS = 5
"""Cost of starting a split, in blocks."""


def get_num_sm_parts(num_heads_per_head_k: int, num_heads_k: int, num_sms: int = NUM_SMS) -> int:
    """SM partitions the decode work is split over (rows of ``tile_scheduler_metadata``)."""
    return max(num_sms // num_heads_k // cdiv(num_heads_per_head_k, BLOCK_SIZE_M), 1)


def get_mla_metadata(
    cache_seqlens: list[int], num_heads_per_head_k: int, num_heads_k: int, num_sms: int = NUM_SMS
) -> tuple[torch.Tensor, torch.Tensor]:
    """Split decode requests into per-SM-partition work (FlashMLA's scheduler, on the CPU).

    Returns ``tile_scheduler_metadata`` ``(num_sm_parts, 8)`` int32, where row ``p`` is
    ``[begin_req, begin_token, end_req, end_token, begin_split, 0, 0, 0]`` (partition ``p``
    processes request ``begin_req`` from token ``begin_token`` through request ``end_req`` up to
    token ``end_token``), and ``num_splits`` ``(batch_size + 1,)`` int32, the running count of
    splits each request was cut into.
    """
    batch_size = len(cache_seqlens)
    num_sm_parts = get_num_sm_parts(num_heads_per_head_k, num_heads_k, num_sms)
    num_blocks = [cdiv(s, BLOCK_SIZE_N) for s in cache_seqlens]
    total = sum(b + FIXED_OVERHEAD_NUM_BLOCKS for b in num_blocks)
    payload = max(
        cdiv(total, num_sm_parts) + FIXED_OVERHEAD_NUM_BLOCKS, 2 * FIXED_OVERHEAD_NUM_BLOCKS
    )
    metadata = torch.zeros(num_sm_parts, TILE_SCHEDULER_METADATA_SIZE, dtype=torch.int32)
    num_splits = [0] * (batch_size + 1)
    req = block = split = cum_splits = 0
    for part in range(num_sm_parts):
        begin = [req, block * BLOCK_SIZE_N, split]
        remain = payload
        while req < batch_size:
            left = num_blocks[req] - block
            if remain >= left + FIXED_OVERHEAD_NUM_BLOCKS:  # finish this request here
                cum_splits += split + 1
                num_splits[req + 1] = cum_splits
                remain -= left + FIXED_OVERHEAD_NUM_BLOCKS
                req, block, split = req + 1, 0, 0
            else:  # cut it, if the piece is worth a split
                if remain > FIXED_OVERHEAD_NUM_BLOCKS:
                    block += remain - FIXED_OVERHEAD_NUM_BLOCKS
                    split += 1
                break
        end_req = req if block > 0 else req - 1
        end_token = block * BLOCK_SIZE_N if block > 0 else cache_seqlens[req - 1] if req else 0
        metadata[part, :5] = torch.tensor([begin[0], begin[1], end_req, end_token, begin[2]])
    return metadata, torch.tensor(num_splits, dtype=torch.int32)


@dataclass
class FlashMLADecodeMetadata(MLACommonDecodeMetadata):
    """Decode part plus FlashMLA's scheduling of it."""

    tile_scheduler_metadata: torch.Tensor
    """(num_sm_parts, 8) int32: see :func:`get_mla_metadata`."""
    num_splits: torch.Tensor
    """(num_decodes + 1,) int32: cumulative splits per request."""


@dataclass
class FlashMLAMetadata(MLACommonMetadata[FlashMLADecodeMetadata]):
    """MLA metadata whose decode part is :class:`FlashMLADecodeMetadata`."""


class FlashMLAMetadataBuilder(MLACommonMetadataBuilder[FlashMLAMetadata]):
    """Adds FlashMLA's tile scheduler metadata to the decode part."""

    def __init__(
        self,
        kv_cache_spec: AttentionSpec,
        block_table: BlockTable,
        vllm_config: VllmConfig,
        device: torch.device | str,
    ) -> None:
        super().__init__(kv_cache_spec, block_table, vllm_config, device, FlashMLAMetadata)
        self.num_q_heads = self._get_vllm_config().model_config.num_attention_heads

    def _build_decode(
        self, block_table_tensor: torch.Tensor, seq_lens: torch.Tensor
    ) -> FlashMLADecodeMetadata:
        if self.device.type == "meta":  # shapes only; they do not depend on the lengths
            num_sm_parts = get_num_sm_parts(self.num_q_heads, 1)
            tile = torch.empty(num_sm_parts, TILE_SCHEDULER_METADATA_SIZE, dtype=torch.int32)
            splits = torch.empty(seq_lens.shape[0] + 1, dtype=torch.int32)
        else:
            assert self._decode_seq_lens_cpu is not None
            # 1 KV head: MLA decodes as multi-query attention over the latent.
            tile, splits = get_mla_metadata(
                to_int_list(self._decode_seq_lens_cpu), self.num_q_heads, 1
            )
        return FlashMLADecodeMetadata(
            block_table=block_table_tensor,
            seq_lens=seq_lens,
            tile_scheduler_metadata=tile.to(self.device),
            num_splits=splits.to(self.device),
        )


class FlashMLABackend(MLACommonBackend):
    """FlashMLA (NVIDIA Hopper MLA decode kernels)."""

    @staticmethod
    def get_name() -> str:
        return "FLASHMLA_VLLM_V1"

    @staticmethod
    def get_builder_cls() -> type[FlashMLAMetadataBuilder]:
        return FlashMLAMetadataBuilder

    @staticmethod
    def get_metadata_cls() -> type[FlashMLAMetadata]:
        return FlashMLAMetadata
