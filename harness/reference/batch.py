"""One committed step for a builder, without a runner: what builder-level checks and tests build.

``make_batch(num_computed=[...], num_scheduled=[...])`` gives each request random distinct blocks
(optionally a shared prefix of blocks), commits the block table, computes the slot mapping of the
scheduled tokens and builds the ``CommonAttentionMetadata`` a runner would pass to ``build``.
Requests must already be decode-first, as the runner's ``reorder_batch`` leaves them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from harness.reference.block_table import BlockTable
from harness.reference.common_metadata import CommonAttentionMetadata
from harness.reference.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from harness.reference.kv_cache_interface import (
    AttentionSpec,
    FullAttentionSpec,
    SlidingWindowSpec,
    cdiv,
)

MLA_HEAD_SIZE = 512 + 64
"""An MLA spec's head size, ``kv_lora_rank + qk_rope_head_dim`` (DeepSeek's): the only one vLLM
0.9.0's MLA metadata accepts."""


@dataclass
class Batch:
    """One step of a small batch, ready for ``builder.build(common_prefix_len, common)``."""

    vllm_config: VllmConfig
    spec: AttentionSpec
    block_table: BlockTable
    common: CommonAttentionMetadata
    block_ids: list[list[int]]
    num_computed: list[int]
    num_scheduled: list[int]

    @property
    def seq_lens(self) -> list[int]:
        return [c + s for c, s in zip(self.num_computed, self.num_scheduled, strict=True)]

    def slots(self, req: int, positions: range) -> torch.Tensor:
        """Slots of ``positions`` of request ``req`` (int64)."""
        bs = self.spec.block_size
        ids = self.block_ids[req]
        return torch.tensor([ids[p // bs] * bs + p % bs for p in positions], dtype=torch.int64)


def make_batch(
    num_computed: list[int],
    num_scheduled: list[int],
    *,
    block_size: int = 16,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_size: int | None = None,
    num_blocks: int = 64,
    sliding_window: int | None = None,
    use_mla: bool = False,
    shared_prefix_blocks: int = 0,
    device: str = "cpu",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
) -> Batch:
    """A committed batch; request ``i`` has ``num_computed[i]`` cached + ``num_scheduled[i]`` new.

    ``head_size`` defaults to what vLLM 0.9.0 accepts: :data:`MLA_HEAD_SIZE` for MLA, 64
    otherwise.
    """
    if head_size is None:
        head_size = MLA_HEAD_SIZE if use_mla else 64
    num_reqs = len(num_computed)
    seq_lens = [c + s for c, s in zip(num_computed, num_scheduled, strict=True)]
    max_model_len = max([*seq_lens, block_size]) + block_size
    model_config = ModelConfig(
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_size,
        max_model_len=max_model_len,
        sliding_window=sliding_window,
        # Every layer slides when there is a window (FlashInfer needs one window for all layers).
        layer_types=() if sliding_window is None else ("sliding_attention",) * 2,
        dtype=dtype,
    )
    max_tokens = max(sum(num_scheduled), 1) + 8
    vllm_config = VllmConfig(
        model_config=model_config,
        cache_config=CacheConfig(block_size=block_size),
        scheduler_config=SchedulerConfig(
            max_num_seqs=max(num_reqs, 1) + 2,
            max_num_batched_tokens=max_tokens,
            max_model_len=max_model_len,
        ),
    )
    args = (block_size, num_kv_heads, head_size, dtype, use_mla)
    spec: AttentionSpec = FullAttentionSpec(*args)
    if sliding_window is not None:
        spec = SlidingWindowSpec(*args, sliding_window)
    rng = np.random.default_rng(seed)
    free = [int(b) for b in rng.permutation(num_blocks)]
    shared = [free.pop() for _ in range(shared_prefix_blocks)]
    block_ids = [
        shared + [free.pop() for _ in range(cdiv(n, block_size) - len(shared))] for n in seq_lens
    ]
    block_table = BlockTable(
        block_size,
        max(num_reqs, 1) + 2,
        cdiv(max_model_len, block_size),
        max_tokens,
        pin_memory=False,
        device=device,
    )
    for i, ids in enumerate(block_ids):
        block_table.add_row(ids, i)
    block_table.commit(num_reqs)
    req_indices = np.repeat(np.arange(num_reqs), num_scheduled)
    positions = np.concatenate(
        [np.arange(c, c + s) for c, s in zip(num_computed, num_scheduled, strict=True)]
        + [np.zeros(0, int)]
    )
    block_table.compute_slot_mapping(req_indices, positions)
    common = common_metadata(num_computed, num_scheduled, device)
    return Batch(vllm_config, spec, block_table, common, block_ids, num_computed, num_scheduled)


def common_metadata(
    num_computed: Sequence[int], num_scheduled: Sequence[int], device: str = "cpu"
) -> CommonAttentionMetadata:
    """The ``CommonAttentionMetadata`` a runner builds for requests of these lengths."""
    query_start_loc_cpu = torch.tensor(
        np.concatenate([[0], np.cumsum(num_scheduled)]), dtype=torch.int32
    )
    seq_lens_cpu = torch.tensor(
        [c + s for c, s in zip(num_computed, num_scheduled, strict=True)], dtype=torch.int32
    )
    return CommonAttentionMetadata(
        query_start_loc=query_start_loc_cpu.to(device, copy=True),
        query_start_loc_cpu=query_start_loc_cpu,
        seq_lens=seq_lens_cpu.to(device, copy=True),
        seq_lens_cpu=seq_lens_cpu,
        num_computed_tokens_cpu=torch.tensor(list(num_computed), dtype=torch.int32),
        num_reqs=len(num_computed),
        num_actual_tokens=int(sum(num_scheduled)),
        max_query_len=max(num_scheduled, default=0),
    )
