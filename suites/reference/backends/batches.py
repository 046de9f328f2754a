"""Small batches for the backend tests: block tables, common metadata and K/V already in the cache.

``make_batch(num_computed=[...], num_scheduled=[...])`` gives each request random distinct blocks
(optionally a shared prefix of blocks), commits the block table, computes the slot mapping of the
scheduled tokens, and builds the ``CommonAttentionMetadata`` a runner would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
from harness.reference.oracle import dense_attention, reshape_and_cache


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


@dataclass
class FakeInputBatch:
    """The two things ``reorder_batch`` touches, recording every swap."""

    req_ids: list[str]
    swaps: list[tuple[int, int]] = field(default_factory=list[tuple[int, int]])

    def swap_states(self, i1: int, i2: int) -> None:
        self.swaps.append((i1, i2))
        self.req_ids[i1], self.req_ids[i2] = self.req_ids[i2], self.req_ids[i1]


@dataclass
class FakeSchedulerOutput:
    """``num_scheduled_tokens`` only."""

    num_scheduled_tokens: dict[str, int]


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

    ``head_size`` defaults to what vLLM 0.9.0 accepts: 576 for MLA, 64 otherwise.
    """
    if head_size is None:
        head_size = 576 if use_mla else 64
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
    spec: AttentionSpec
    if sliding_window is None:
        spec = FullAttentionSpec(block_size, num_kv_heads, head_size, dtype, use_mla)
    else:
        spec = SlidingWindowSpec(
            block_size, num_kv_heads, head_size, dtype, use_mla, sliding_window
        )
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
    query_start_loc_cpu = torch.tensor(
        np.concatenate([[0], np.cumsum(num_scheduled)]), dtype=torch.int32
    )
    seq_lens_cpu = torch.tensor(seq_lens, dtype=torch.int32)
    common = CommonAttentionMetadata(
        query_start_loc=query_start_loc_cpu.to(device),
        query_start_loc_cpu=query_start_loc_cpu,
        seq_lens=seq_lens_cpu.to(device),
        seq_lens_cpu=seq_lens_cpu,
        num_computed_tokens_cpu=torch.tensor(num_computed, dtype=torch.int32),
        num_reqs=num_reqs,
        num_actual_tokens=int(sum(num_scheduled)),
        max_query_len=max(num_scheduled, default=0),
    )
    return Batch(vllm_config, spec, block_table, common, block_ids, num_computed, num_scheduled)


def make_kv(
    batch: Batch, num_kv_heads: int, head_size: int, *, prefix_len: int = 0, seed: int = 0
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Random K and V ``(seq_len, num_kv_heads, head_size)`` per request; the first
    ``prefix_len`` positions are the same for every request (a shared prefix)."""
    g = torch.Generator().manual_seed(seed)
    shape = (prefix_len, num_kv_heads, head_size)
    prefix_k, prefix_v = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    ks, vs = [], []
    for n in batch.seq_lens:
        rest = (n - prefix_len, num_kv_heads, head_size)
        ks.append(torch.cat([prefix_k, torch.randn(rest, generator=g)]))
        vs.append(torch.cat([prefix_v, torch.randn(rest, generator=g)]))
    return ks, vs


def write_history(
    batch: Batch,
    ks: list[torch.Tensor],
    vs: list[torch.Tensor],
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
) -> None:
    """Put each request's already-computed K/V into the cache, through its own slots."""
    for i, c in enumerate(batch.num_computed):
        slots = batch.slots(i, range(c)).to(key_cache.device)
        reshape_and_cache(ks[i][:c], vs[i][:c], key_cache, value_cache, slots)


def new_tokens(batch: Batch, xs: list[torch.Tensor]) -> torch.Tensor:
    """The scheduled (newest) rows of every request, concatenated in batch order."""
    return torch.cat([x[c:] for x, c in zip(xs, batch.num_computed, strict=True)])


def expected_attention(
    batch: Batch,
    query: torch.Tensor,
    ks: list[torch.Tensor],
    vs: list[torch.Tensor],
    scale: float,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Dense attention per request, flattened to ``(num_tokens, num_heads * head_size_v)``."""
    qsl = batch.common.query_start_loc_cpu.tolist()
    outs = [
        dense_attention(
            query[qsl[i] : qsl[i + 1]], ks[i], vs[i], scale=scale, sliding_window=sliding_window
        )
        for i in range(batch.common.num_reqs)
    ]
    return torch.cat(outs).flatten(1)
