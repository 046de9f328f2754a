"""Test helpers over :func:`harness.reference.batch.make_batch`: K/V already in the cache, dense
expectations, and stand-ins for what ``reorder_batch`` touches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from harness.reference.batch import Batch
from harness.reference.oracle import dense_attention, reshape_and_cache


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
