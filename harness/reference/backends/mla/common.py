"""MLA backends' common part (vLLM 0.9.0 ``vllm/v1/attention/backends/mla/common.py``).

KV cache ``(num_blocks, block_size, head_size)`` with ``head_size = kv_lora_rank +
qk_rope_head_dim``, which must be 576 as in vLLM 0.9.0. Like 0.9.0 the builder copies the CPU slot
mapping to a fresh device tensor, reorders the batch decode-first, describes the prefills and
calls ``_build_decode(block_table_tensor=..., seq_lens=...)`` BY KEYWORD (the names after vLLM PR
#17483; every subclass must keep them). The impl computes MLA in the absorbed form, as
multi-query attention over the latent (``k = [kv_c, k_pe]``, ``v = kv_c``), before ``W_UV``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch

from harness.reference.backends.abstract import (
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
    InputBatchLike,
    SchedulerOutputLike,
)
from harness.reference.backends.utils import (
    reorder_batch_to_split_decodes_and_prefills,
    slot_mapping_to_device,
    split_decodes_and_prefills,
)
from harness.reference.block_table import BlockTable
from harness.reference.common_metadata import CommonAttentionMetadata
from harness.reference.config import VllmConfig
from harness.reference.kv_cache_interface import AttentionSpec
from harness.reference.oracle import concat_and_cache_mla, paged_attention


class MLACommonBackend(AttentionBackend):
    """The MLA family's KV cache layout and default classes (vLLM's Triton MLA)."""

    @staticmethod
    def get_supported_head_sizes() -> list[int]:
        return [576]

    @staticmethod
    def get_name() -> str:
        return "TRITON_MLA_VLLM_V1"

    @staticmethod
    def get_kv_cache_shape(
        num_blocks: int, block_size: int, num_kv_heads: int, head_size: int
    ) -> tuple[int, ...]:
        return (num_blocks, block_size, head_size)

    @staticmethod
    def get_builder_cls() -> type[MLACommonMetadataBuilder[Any]]:
        return MLACommonMetadataBuilder

    @staticmethod
    def get_metadata_cls() -> type[MLACommonMetadata[Any]]:
        return MLACommonMetadata

    @staticmethod
    def get_impl_cls() -> type[MLACommonImpl]:
        return MLACommonImpl


@dataclass
class MLACommonPrefillMetadata:
    """The prefill requests (rows ``[num_decodes, num_reqs)``)."""

    block_table: torch.Tensor
    """(num_prefills, max_num_blocks_per_req) int32."""
    query_start_loc: torch.Tensor
    """(num_prefills + 1,) int32, relative to the first prefill token."""
    max_query_len: int
    seq_lens: torch.Tensor
    """(num_prefills,) int32: context + new tokens. Ours: vLLM carries chunked-context
    metadata instead (it attends to the context in workspace-sized chunks)."""


@dataclass
class MLACommonDecodeMetadata:
    """The decode requests (rows ``[0, num_decodes)``, one token each)."""

    block_table: torch.Tensor
    """(num_decodes, max_num_blocks_per_req) int32."""
    seq_lens: torch.Tensor
    """(num_decodes,) int32."""


D = TypeVar("D", bound=MLACommonDecodeMetadata)


@dataclass
class MLACommonMetadata(Generic[D]):
    """One group's MLA metadata for one step."""

    num_actual_tokens: int
    """Scheduled tokens, without padding."""
    query_start_loc: torch.Tensor
    """(num_reqs + 1,) int32."""
    slot_mapping: torch.Tensor
    """(num_actual_tokens,) int64 (device buffer tail is -1)."""
    num_decodes: int
    """Decode requests, at the front."""
    num_decode_tokens: int
    num_prefills: int
    """The other requests."""
    head_dim: int | None = None
    """Latent width ``kv_lora_rank + qk_rope_head_dim``."""
    decode: D | None = None
    """Decode part, from the builder's ``_build_decode``."""
    prefill: MLACommonPrefillMetadata | None = None

    def __post_init__(self) -> None:
        supported = MLACommonBackend.get_supported_head_sizes()
        if self.head_dim is not None and self.head_dim not in supported:
            raise ValueError(
                f"Only {supported} are supported for head_dim, received {self.head_dim}."
            )


M = TypeVar("M", bound=MLACommonMetadata[Any])


class MLACommonMetadataBuilder(AttentionMetadataBuilder[M]):
    """Splits the batch decode-first; prefills here, decodes via ``_build_decode`` (by keyword)."""

    def __init__(
        self,
        kv_cache_spec: AttentionSpec,
        block_table: BlockTable,
        vllm_config: VllmConfig,
        device: torch.device | str,
        metadata_cls: type[M] | None = None,
    ) -> None:
        super().__init__(kv_cache_spec, block_table, vllm_config, device)
        self.metadata_cls: type[Any] = metadata_cls or MLACommonMetadata
        self._decode_seq_lens_cpu: torch.Tensor | None = None

    def reorder_batch(
        self, input_batch: InputBatchLike, scheduler_output: SchedulerOutputLike
    ) -> bool:
        return reorder_batch_to_split_decodes_and_prefills(
            input_batch, scheduler_output, decode_threshold=1
        )

    def _build_decode(
        self, block_table_tensor: torch.Tensor, seq_lens: torch.Tensor
    ) -> MLACommonDecodeMetadata:
        """The decode part. Subclasses override it keeping these parameter names."""
        return MLACommonDecodeMetadata(block_table=block_table_tensor, seq_lens=seq_lens)

    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata) -> M:
        del common_prefix_len  # MLA has no cascade path.
        num_reqs = common_attn_metadata.num_reqs
        num_actual_tokens = common_attn_metadata.num_actual_tokens
        split = split_decodes_and_prefills(common_attn_metadata)
        nd = split.num_decodes
        block_table_tensor = self.block_table.get_device_tensor()[:num_reqs]
        slot_mapping = slot_mapping_to_device(self.block_table, num_actual_tokens, self.device)
        query_start_loc = common_attn_metadata.query_start_loc
        seq_lens = common_attn_metadata.seq_lens

        prefill_metadata = None
        if split.num_prefills > 0:
            qsl_cpu = common_attn_metadata.query_start_loc_cpu[nd : num_reqs + 1]
            prefill_metadata = MLACommonPrefillMetadata(
                block_table=block_table_tensor[nd:, ...],
                query_start_loc=query_start_loc[nd:] - query_start_loc[nd],
                max_query_len=int((qsl_cpu[1:] - qsl_cpu[:-1]).max()),
                seq_lens=seq_lens[nd:num_reqs],
            )

        decode_metadata = None
        if nd > 0:
            # CPU twin for subclasses whose decode tensors have data-dependent shapes (AITER);
            # vLLM computes those on the device, which the meta device cannot do.
            self._decode_seq_lens_cpu = common_attn_metadata.seq_lens_cpu[:nd]
            decode_metadata = self._build_decode(
                block_table_tensor=block_table_tensor[:nd, ...],
                seq_lens=seq_lens[:nd],
            )

        metadata: M = self.metadata_cls(
            num_actual_tokens=num_actual_tokens,
            query_start_loc=query_start_loc,
            slot_mapping=slot_mapping,
            num_decodes=nd,
            num_decode_tokens=split.num_decode_tokens,
            num_prefills=split.num_prefills,
            head_dim=self.kv_cache_spec.head_size,
            decode=decode_metadata,
            prefill=prefill_metadata,
        )
        return metadata


class MLACommonImpl(AttentionImpl[MLACommonMetadata[Any]]):
    """MLA as MQA over the latent: ``k = [kv_c, k_pe]``, ``v = kv_c`` (see the module doc).

    ``forward`` takes ``query`` ``(num_tokens, num_heads, kv_lora_rank + qk_rope_head_dim)``
    (already in the latent space), ``key`` = ``kv_c`` ``(num_tokens, kv_lora_rank)`` and
    ``value`` = ``k_pe`` ``(num_tokens, qk_rope_head_dim)``; it returns the latent output
    ``(num_tokens, num_heads * kv_lora_rank)``.
    """

    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int,
        sliding_window: int | None = None,
        *,
        kv_lora_rank: int,
        qk_rope_head_dim: int,
    ) -> None:
        if num_kv_heads != 1 or sliding_window is not None:
            raise ValueError("MLA has one latent KV head and no sliding window")
        if head_size != kv_lora_rank + qk_rope_head_dim:
            raise ValueError(f"{head_size=} != {kv_lora_rank=} + {qk_rope_head_dim=}")
        super().__init__(num_heads, head_size, scale, num_kv_heads)
        self.kv_lora_rank = kv_lora_rank

    @property
    def output_head_size(self) -> int:
        return self.kv_lora_rank

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: MLACommonMetadata[Any] | None,
    ) -> torch.Tensor:
        output = self._empty_output(query)
        if attn_metadata is None or query.is_meta:
            return output
        md = attn_metadata
        concat_and_cache_mla(key, value, kv_cache, md.slot_mapping)
        key_cache = kv_cache.unsqueeze(2)
        value_cache = kv_cache[..., : self.kv_lora_rank].unsqueeze(2)
        nd, ndt, n = md.num_decodes, md.num_decode_tokens, md.num_actual_tokens
        if md.decode is not None:
            out, _ = paged_attention(
                query[:ndt],
                key_cache,
                value_cache,
                query_start_loc=md.query_start_loc[: nd + 1],
                seq_lens=md.decode.seq_lens,
                block_table=md.decode.block_table,
                scale=self.scale,
            )
            output[:ndt] = out.flatten(1)
        if md.prefill is not None:
            out, _ = paged_attention(
                query[ndt:n],
                key_cache,
                value_cache,
                query_start_loc=md.prefill.query_start_loc,
                seq_lens=md.prefill.seq_lens,
                block_table=md.prefill.block_table,
                scale=self.scale,
            )
            output[ndt:n] = out.flatten(1)
        return output
