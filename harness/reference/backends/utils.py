"""Pieces several builders share: decode-first reordering, the decode/prefill split, the slot
mapping copy, FlashInfer-style paged-KV index tensors and the cascade prefix length."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from harness.reference.backends.abstract import (
    AttentionMetadataBuilder,
    InputBatchLike,
    SchedulerOutputLike,
)
from harness.reference.block_table import BlockTable
from harness.reference.common_metadata import CommonAttentionMetadata
from harness.reference.oracle import PAD_SLOT_ID, to_int_list

DEFAULT_NUM_SMS = 132
"""Streaming multiprocessors of an H100: what the cascade heuristic assumes when the runner knows
no device (vLLM reads ``torch.cuda.get_device_properties(device).multi_processor_count``)."""


def device_num_sms(device: torch.device) -> int:
    """The SM count of a CUDA ``device`` as vLLM reads it; :data:`DEFAULT_NUM_SMS` elsewhere."""
    if device.type != "cuda":
        return DEFAULT_NUM_SMS
    get_properties: Any = getattr(torch.cuda, "get_device_properties")  # noqa: B009 (untyped)
    return int(get_properties(device).multi_processor_count)


def reorder_batch_to_split_decodes_and_prefills(
    input_batch: InputBatchLike, scheduler_output: SchedulerOutputLike, decode_threshold: int = 1
) -> bool:
    """Move decodes (``<= decode_threshold`` scheduled tokens) to the front with few swaps (vLLM's
    algorithm); True if the batch changed.
    """
    decodes: list[int] = []
    prefills: list[int] = []
    for i, req_id in enumerate(input_batch.req_ids):
        if scheduler_output.num_scheduled_tokens[req_id] <= decode_threshold:
            decodes.append(i)
        else:
            prefills.append(i)
    num_decodes = len(decodes)
    modified_batch = False
    for i in range(1, min(num_decodes, len(prefills)) + 1):
        decode_idx = decodes[num_decodes - i]
        if decode_idx < num_decodes:
            break
        input_batch.swap_states(prefills[i - 1], decode_idx)
        modified_batch = True
    return modified_batch


@dataclass(frozen=True, slots=True)
class DecodePrefillSplit:
    """How a decode-first batch splits: decodes are rows ``[0, num_decodes)``."""

    num_decodes: int
    num_prefills: int
    num_decode_tokens: int
    num_prefill_tokens: int


def split_decodes_and_prefills(
    common_attn_metadata: CommonAttentionMetadata, decode_threshold: int = 1
) -> DecodePrefillSplit:
    """Split a decode-first batch from its CPU query lengths (vLLM 0.9.0 stashes the counts in
    ``reorder_batch``; recomputed so every group agrees). A batch not decode-first raises.
    """
    qsl = common_attn_metadata.query_start_loc_cpu[: common_attn_metadata.num_reqs + 1]
    is_decode = (qsl[1:] - qsl[:-1]) <= decode_threshold
    num_decodes = int(is_decode.sum())
    if not bool(is_decode[:num_decodes].all()):
        raise ValueError(
            "batch is not decode-first: query lengths "
            f"{to_int_list(qsl[1:] - qsl[:-1])}; run reorder_batch before build"
        )
    num_decode_tokens = int(qsl[num_decodes])
    return DecodePrefillSplit(
        num_decodes=num_decodes,
        num_prefills=common_attn_metadata.num_reqs - num_decodes,
        num_decode_tokens=num_decode_tokens,
        num_prefill_tokens=common_attn_metadata.num_actual_tokens - num_decode_tokens,
    )


def copy_slot_mapping(block_table: BlockTable, num_actual_tokens: int) -> torch.Tensor:
    """Copy the group's CPU slot mapping into its device buffer; fill the unused tail with -1.

    vLLM 0.9.0's FlashAttention builder (its FlashInfer and MLA builders use
    :func:`slot_mapping_to_device`). Returns the ``(num_actual_tokens,)`` device view.
    """
    block_table.slot_mapping[:num_actual_tokens].copy_(
        block_table.slot_mapping_cpu[:num_actual_tokens], non_blocking=True
    )
    block_table.slot_mapping[num_actual_tokens:].fill_(PAD_SLOT_ID)
    return block_table.slot_mapping[:num_actual_tokens]


def slot_mapping_to_device(
    block_table: BlockTable, num_actual_tokens: int, device: torch.device
) -> torch.Tensor:
    """``(num_actual_tokens,)`` int64: a fresh device copy of the group's CPU slot mapping.

    vLLM 0.9.0's FlashInfer and MLA builders: the device slot-mapping buffer is not written.
    """
    return block_table.slot_mapping_cpu[:num_actual_tokens].to(device, non_blocking=True).long()


def compute_paged_kv_indptr(seq_lens_cpu: torch.Tensor, page_size: int) -> torch.Tensor:
    """``(num_reqs + 1,)`` int32: where each request's pages start in ``paged_kv_indices``."""
    num_pages = (seq_lens_cpu + page_size - 1) // page_size
    indptr = torch.zeros(seq_lens_cpu.shape[0] + 1, dtype=torch.int32)
    torch.cumsum(num_pages, dim=0, dtype=torch.int32, out=indptr[1:])
    return indptr


def compute_paged_kv_indices(
    block_table_cpu: torch.Tensor, seq_lens_cpu: torch.Tensor, page_size: int
) -> torch.Tensor:
    """``(total_pages,)`` int32: each request's first ``cdiv(seq_len, page_size)`` block ids.

    ``block_table_cpu`` holds one row per request of ``seq_lens_cpu``. Computed with numpy: torch's
    boolean-mask indexing costs ~10x more per step, which the full-scale simulations feel.
    """
    num_pages = (seq_lens_cpu.numpy() + page_size - 1) // page_size
    # Mask only the columns some request uses: the table is max_model_len / page_size wide.
    max_pages = int(num_pages.max()) if num_pages.size else 0
    used = block_table_cpu.numpy()[:, :max_pages]
    mask = np.arange(max_pages) < num_pages[:, None]
    return torch.as_tensor(used[mask], dtype=torch.int32)


def compute_paged_kv_last_page_len(seq_lens_cpu: torch.Tensor, page_size: int) -> torch.Tensor:
    """``(num_reqs,)`` int32: tokens in each request's last page (``page_size`` when full)."""
    last = seq_lens_cpu % page_size
    return torch.where(last == 0, page_size, last).to(torch.int32)


def compute_cascade_attn_prefix_len(
    builder: AttentionMetadataBuilder[Any],
    num_scheduled_tokens: npt.NDArray[np.int32],
    num_computed_tokens: npt.NDArray[np.int32],
    num_common_prefix_blocks: int,
    num_query_heads: int,
    num_sms: int = DEFAULT_NUM_SMS,
) -> int:
    """The ``common_prefix_len`` to pass to ``builder.build`` (vLLM's runner method of that name):
    capped at the fewest computed tokens, rounded down to the block size, 0 unless the builder's
    ``use_cascade_attention`` says yes.
    """
    spec = builder.kv_cache_spec
    common_prefix_len = num_common_prefix_blocks * spec.block_size
    if common_prefix_len == 0 or len(num_scheduled_tokens) == 0:
        return 0
    common_prefix_len = min(common_prefix_len, int(num_computed_tokens.min()))
    common_prefix_len = common_prefix_len // spec.block_size * spec.block_size
    use_cascade = builder.use_cascade_attention(
        common_prefix_len=common_prefix_len,
        query_lens=num_scheduled_tokens,
        num_query_heads=num_query_heads,
        num_kv_heads=spec.num_kv_heads,
        use_alibi=False,
        use_sliding_window=getattr(spec, "sliding_window", None) is not None,
        num_sms=num_sms,
    )
    return common_prefix_len if use_cascade else 0
