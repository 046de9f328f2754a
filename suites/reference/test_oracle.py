"""The oracle: K/V written through a slot mapping and read back through block tables equals dense
attention (fp32, ``FP32_ATOL, FP32_RTOL``), for full attention and sliding windows, with GQA."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.reference.oracle import (
    DECODE_BATCH,
    FP32_ATOL,
    FP32_RTOL,
    PAD_SLOT_ID,
    concat_and_cache_mla,
    dense_attention,
    merge_attn_states,
    paged_attention,
    reshape_and_cache,
)


def test_reshape_and_cache_writes_through_slots_and_skips_padding() -> None:
    key_cache = torch.zeros(3, 2, 1, 1)  # 3 blocks of 2 slots
    value_cache = torch.zeros(3, 2, 1, 1)
    key = torch.tensor([1.0, 2.0, 3.0, 4.0]).view(4, 1, 1)
    slots = torch.tensor([5, PAD_SLOT_ID, 0])  # the 4th token is padding past the slot mapping
    reshape_and_cache(key, -key, key_cache, value_cache, slots)
    assert key_cache.flatten().tolist() == [3.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert value_cache.flatten().tolist() == [-3.0, 0.0, 0.0, 0.0, 0.0, -1.0]


def test_reshape_and_cache_writes_into_strided_views() -> None:
    kv_cache = torch.zeros(4, 2, 2, 1, 1)  # FlashInfer layout: K and V interleaved per block
    key = torch.ones(1, 1, 1)
    reshape_and_cache(key, 2 * key, kv_cache[:, 0], kv_cache[:, 1], torch.tensor([7]))
    assert kv_cache[3, 0, 1].item() == 1.0 and kv_cache[3, 1, 1].item() == 2.0
    assert kv_cache.sum().item() == 3.0


def test_concat_and_cache_mla_stores_latent_then_rope() -> None:
    cache = torch.zeros(2, 2, 3)
    concat_and_cache_mla(
        torch.tensor([[1.0, 2.0]]), torch.tensor([[3.0]]), cache, torch.tensor([2])
    )
    assert cache[1, 0].tolist() == [1.0, 2.0, 3.0]


def _random_paged_batch(
    seed: int,
    query_lens: list[int],
    context_lens: list[int],
    block_size: int,
    num_heads: int,
    num_kv_heads: int,
    head_size: int = 4,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random K/V of every request written through random distinct blocks.

    Returns ``query, key_cache, value_cache, query_start_loc, seq_lens, block_table`` and leaves
    the per-request K/V reachable only through the cache.
    """
    g = torch.Generator().manual_seed(seed)
    seq_lens = [c + q for c, q in zip(context_lens, query_lens, strict=True)]
    blocks_per_req = [-(-n // block_size) for n in seq_lens]
    num_blocks = sum(blocks_per_req) + 3
    perm = np.random.default_rng(seed).permutation(num_blocks).tolist()
    block_table = torch.zeros(len(seq_lens), max(blocks_per_req), dtype=torch.int32)
    key_cache = torch.full((num_blocks, block_size, num_kv_heads, head_size), float("nan"))
    value_cache = key_cache.clone()
    for i, n in enumerate(seq_lens):
        ids = [perm.pop() for _ in range(blocks_per_req[i])]
        block_table[i, : len(ids)] = torch.tensor(ids)
        slots = torch.tensor([ids[p // block_size] * block_size + p % block_size for p in range(n)])
        k = torch.randn(n, num_kv_heads, head_size, generator=g)
        v = torch.randn(n, num_kv_heads, head_size, generator=g)
        reshape_and_cache(k, v, key_cache, value_cache, slots)
    query = torch.randn(sum(query_lens), num_heads, head_size, generator=g)
    qsl = torch.tensor([0, *np.cumsum(query_lens).tolist()], dtype=torch.int32)
    return query, key_cache, value_cache, qsl, torch.tensor(seq_lens), block_table


def _dense_from_cache(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    qsl: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: torch.Tensor,
    scale: float,
    sliding_window: int | None,
) -> torch.Tensor:
    """Dense attention per request on K/V gathered slot by slot (independent of the paged path)."""
    bs = key_cache.shape[1]
    outs = []
    for i, n in enumerate(seq_lens.tolist()):
        pos = torch.arange(n)
        blocks = block_table[i, pos // bs].long()
        k, v = key_cache[blocks, pos % bs], value_cache[blocks, pos % bs]
        q = query[int(qsl[i]) : int(qsl[i + 1])]
        outs.append(dense_attention(q, k, v, scale=scale, sliding_window=sliding_window))
    return torch.cat(outs)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    reqs=st.lists(st.tuples(st.integers(1, 9), st.integers(0, 20)), min_size=1, max_size=5),
    block_size=st.sampled_from([1, 2, 4, 16]),
    heads=st.sampled_from([(1, 1), (4, 2), (4, 1), (6, 3)]),
    sliding_window=st.one_of(st.none(), st.integers(1, 12)),
)
def test_paged_equals_dense_on_random_mixed_batches(
    seed: int,
    reqs: list[tuple[int, int]],
    block_size: int,
    heads: tuple[int, int],
    sliding_window: int | None,
) -> None:
    # query length 1 with context is a decode; longer ones are (chunked) prefills.
    query_lens = [1 if q == 1 else q for q, _ in reqs]
    context_lens = [c for _, c in reqs]
    query, kc, vc, qsl, seq_lens, bt = _random_paged_batch(
        seed, query_lens, context_lens, block_size, *heads
    )
    out, lse = paged_attention(
        query,
        kc,
        vc,
        query_start_loc=qsl,
        seq_lens=seq_lens,
        block_table=bt,
        scale=0.5,
        sliding_window=sliding_window,
    )
    expected = _dense_from_cache(query, kc, vc, qsl, seq_lens, bt, 0.5, sliding_window)
    torch.testing.assert_close(out, expected, atol=FP32_ATOL, rtol=FP32_RTOL)
    assert torch.isfinite(lse).all()


def test_paged_attention_reads_through_the_block_table() -> None:
    """Swapping two block ids in the table changes the result: the read really is paged."""
    query, kc, vc, qsl, seq_lens, bt = _random_paged_batch(0, [3, 1], [9, 6], 4, 4, 2)

    def run(block_table: torch.Tensor) -> torch.Tensor:
        out, _ = paged_attention(
            query,
            kc,
            vc,
            query_start_loc=qsl,
            seq_lens=seq_lens,
            block_table=block_table,
            scale=0.5,
        )
        return out

    out = run(bt)
    swapped = bt.clone()
    swapped[0, [0, 2]] = swapped[0, [2, 0]]  # the last block is partly masked for early queries
    out_swapped = run(swapped)
    assert not torch.allclose(out[:3], out_swapped[:3])
    torch.testing.assert_close(out[3:], out_swapped[3:])  # request 1 is untouched


def test_padding_rows_are_zero() -> None:
    query, kc, vc, qsl, seq_lens, bt = _random_paged_batch(1, [2], [3], 2, 2, 2)
    padded = torch.cat([query, torch.randn(3, *query.shape[1:])])
    out, lse = paged_attention(
        padded, kc, vc, query_start_loc=qsl, seq_lens=seq_lens, block_table=bt, scale=1.0
    )
    assert out[2:].abs().sum() == 0 and torch.isinf(lse[2:]).all()


@pytest.mark.parametrize("split", [1, 4, 7])
def test_merge_attn_states_of_disjoint_key_sets_equals_full_attention(split: int) -> None:
    g = torch.Generator().manual_seed(split)
    q = torch.randn(3, 2, 4, generator=g)
    k = torch.randn(8, 2, 4, generator=g)
    v = torch.randn(8, 2, 4, generator=g)
    cache_k, cache_v = k.view(8, 1, 2, 4), v.view(8, 1, 2, 4)  # block size 1: block id = position

    def attend(first_block: int, num_keys: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Non-causal attention over keys ``first_block .. first_block + num_keys - 1``."""
        return paged_attention(
            q,
            cache_k,
            cache_v,
            query_start_loc=torch.tensor([0, 3]),
            seq_lens=torch.tensor([num_keys]),
            block_table=torch.arange(first_block, 8)[None],
            scale=0.3,
            causal=False,
        )

    merged = merge_attn_states(*attend(0, split), *attend(split, 8 - split))
    torch.testing.assert_close(
        merged, dense_attention(q, k, v, scale=0.3, causal=False), atol=FP32_ATOL, rtol=FP32_RTOL
    )


def test_sliding_window_of_one_sees_only_itself() -> None:
    q, k, v = torch.randn(4, 1, 2), torch.randn(4, 1, 2), torch.randn(4, 1, 2)
    torch.testing.assert_close(dense_attention(q, k, v, scale=1.0, sliding_window=1), v)


@pytest.mark.parametrize("sliding_window", [None, 5])
def test_decodes_batched_past_decode_batch_equal_dense(sliding_window: int | None) -> None:
    # More decodes than one batch holds, of different lengths, next to a prefill; unwritten slots
    # hold NaN, so a padded key or value that leaked into the batch would show.
    num_decodes = DECODE_BATCH + 7
    query_lens = [1] * num_decodes + [3]
    context_lens = [1 + (7 * i) % 23 for i in range(num_decodes)] + [4]
    query, kc, vc, qsl, seq_lens, bt = _random_paged_batch(5, query_lens, context_lens, 4, 4, 2)
    out, lse = paged_attention(
        query,
        kc,
        vc,
        query_start_loc=qsl,
        seq_lens=seq_lens,
        block_table=bt,
        scale=0.5,
        sliding_window=sliding_window,
    )
    expected = _dense_from_cache(query, kc, vc, qsl, seq_lens, bt, 0.5, sliding_window)
    torch.testing.assert_close(out, expected, atol=FP32_ATOL, rtol=FP32_RTOL)
    assert torch.isfinite(lse).all()


def test_decodes_ignore_blocks_that_slid_out_of_the_window() -> None:
    """Blocks wholly outside a decode's window may be the null block (vLLM frees them): NaN there
    must not reach the output, in batched decodes as in single ones."""
    query_lens = [1, 1, 1]
    context_lens = [20, 13, 17]
    query, kc, vc, qsl, seq_lens, bt = _random_paged_batch(7, query_lens, context_lens, 4, 4, 2)
    window = 5
    expected = _dense_from_cache(query, kc, vc, qsl, seq_lens, bt, 0.5, window)
    used = set(bt.flatten().tolist())
    null_block = next(b for b in range(kc.shape[0]) if b not in used)  # one of 3 spare blocks
    kc[null_block] = float("nan")
    vc[null_block] = float("nan")
    for i, n in enumerate(seq_lens.tolist()):
        bt[i, : (n - window) // 4] = null_block  # every block before the window
    out, lse = paged_attention(
        query,
        kc,
        vc,
        query_start_loc=qsl,
        seq_lens=seq_lens,
        block_table=bt,
        scale=0.5,
        sliding_window=window,
    )
    torch.testing.assert_close(out, expected, atol=FP32_ATOL, rtol=FP32_RTOL)
    assert torch.isfinite(lse).all()
