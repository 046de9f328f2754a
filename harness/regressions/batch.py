"""One committed step for a single builder, without a runner: what builder-level checks build from.

``step_for(spec, [(num_computed, num_scheduled), ...])`` gives every request distinct blocks (in
an order unlike their ids), commits the group's block table, computes its slot mapping and wraps
the lengths in the :class:`CommonAttentionMetadata` a runner would pass to ``build``. Requests
must already be decode-first, as the runner's ``reorder_batch`` leaves them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from harness.reference.block_table import BlockTable
from harness.reference.common_metadata import CommonAttentionMetadata
from harness.reference.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from harness.reference.kv_cache_interface import AttentionSpec, cdiv

MLA_HEAD_SIZE = 512 + 64
"""An MLA spec's head size, ``kv_lora_rank + qk_rope_head_dim`` (DeepSeek's): the only one vLLM
0.9.0's MLA metadata accepts."""


@dataclass
class BuilderStep:
    """A step ready for ``builder_cls(spec, block_table, vllm_config, "cpu").build(0, common)``."""

    vllm_config: VllmConfig
    spec: AttentionSpec
    block_table: BlockTable
    common: CommonAttentionMetadata
    block_ids: list[list[int]]
    """Each request's blocks, in order."""
    seq_lens: list[int]


def step_for(
    spec: AttentionSpec, requests: list[tuple[int, int]], model_config: ModelConfig
) -> BuilderStep:
    """``requests`` are ``(num_computed, num_scheduled)`` pairs, decodes first."""
    block_size = spec.block_size
    seq_lens = [c + s for c, s in requests]
    max_model_len = max(seq_lens) + block_size
    num_tokens = sum(s for _, s in requests)
    vllm_config = VllmConfig(
        model_config=model_config,
        cache_config=CacheConfig(block_size=block_size),
        scheduler_config=SchedulerConfig(
            max_num_seqs=len(requests),
            max_num_batched_tokens=num_tokens,
            max_model_len=max_model_len,
        ),
    )
    # Hand out blocks from the top down, so that block ids never equal their positions.
    next_block = sum(cdiv(n, block_size) for n in seq_lens) + 1
    block_ids: list[list[int]] = []
    for n in seq_lens:
        ids = list(range(next_block - 1, next_block - 1 - cdiv(n, block_size), -1))
        next_block -= len(ids)
        block_ids.append(ids)
    table = BlockTable(
        block_size, len(requests), cdiv(max_model_len, block_size), num_tokens, False, "cpu"
    )
    for row, ids in enumerate(block_ids):
        table.add_row(ids, row)
    table.commit(len(requests))
    req_indices = np.repeat(np.arange(len(requests)), [s for _, s in requests])
    positions = np.concatenate([np.arange(c, c + s) for c, s in requests])
    table.compute_slot_mapping(req_indices, positions)
    query_start_loc = torch.tensor([0, *np.cumsum([s for _, s in requests])], dtype=torch.int32)
    seq_lens_t = torch.tensor(seq_lens, dtype=torch.int32)
    common = CommonAttentionMetadata(
        query_start_loc=query_start_loc,
        query_start_loc_cpu=query_start_loc.clone(),
        seq_lens=seq_lens_t,
        seq_lens_cpu=seq_lens_t.clone(),
        num_computed_tokens_cpu=torch.tensor([c for c, _ in requests], dtype=torch.int32),
        num_reqs=len(requests),
        num_actual_tokens=num_tokens,
        max_query_len=max(s for _, s in requests),
    )
    return BuilderStep(vllm_config, spec, table, common, block_ids, seq_lens)
