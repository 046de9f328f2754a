"""Property: every backend's impl, reading K/V back through the metadata its builder built, equals
dense attention (``FP32_ATOL, FP32_RTOL``) on random mixed prefill/decode batches, with and without a
sliding window, for any block size the backend accepts (FlashAttention: multiples of 16)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.reference.backends import get_attn_backend
from harness.reference.batch import make_batch
from harness.reference.oracle import FP32_ATOL, FP32_RTOL

from .batches import expected_attention, make_kv, new_tokens, write_history

BATCHES = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 7)), min_size=1, max_size=5)
BLOCK_SIZES = {"FLASH_ATTN": [16, 32], "FLASHINFER": [1, 2, 4, 16]}
HEAD_SIZE = 64


@pytest.mark.parametrize("name", ["FLASH_ATTN", "FLASHINFER"])
@settings(max_examples=15, deadline=None)
@given(
    reqs=BATCHES,
    block_choice=st.integers(0, 3),
    sliding_window=st.one_of(st.none(), st.integers(1, 20)),
    seed=st.integers(0, 2**16),
)
def test_backend_equals_dense(
    name: str,
    reqs: list[tuple[int, int]],
    block_choice: int,
    sliding_window: int | None,
    seed: int,
) -> None:
    block_size = BLOCK_SIZES[name][block_choice % len(BLOCK_SIZES[name])]
    reqs = sorted(reqs, key=lambda r: r[1] != 1)  # decode-first, as reorder_batch leaves it
    batch = make_batch(
        [c for c, _ in reqs],
        [s for _, s in reqs],
        block_size=block_size,
        num_blocks=512,
        sliding_window=sliding_window,
        seed=seed,
    )
    backend = get_attn_backend(name)
    md = backend.get_builder_cls()(batch.spec, batch.block_table, batch.vllm_config, "cpu").build(
        0, batch.common
    )
    kv_cache = torch.zeros(backend.get_kv_cache_shape(512, block_size, 2, HEAD_SIZE))
    key_cache, value_cache = (
        (kv_cache[0], kv_cache[1]) if name == "FLASH_ATTN" else kv_cache.unbind(1)
    )
    ks, vs = make_kv(batch, 2, HEAD_SIZE, seed=seed)
    write_history(batch, ks, vs, key_cache, value_cache)
    query = torch.randn(
        batch.common.num_actual_tokens, 4, HEAD_SIZE, generator=torch.Generator().manual_seed(seed)
    )
    scale = HEAD_SIZE**-0.5
    impl = backend.get_impl_cls()(4, HEAD_SIZE, scale, 2, sliding_window=sliding_window)
    out = impl.forward(query, new_tokens(batch, ks), new_tokens(batch, vs), kv_cache, md)
    expected = expected_attention(batch, query, ks, vs, scale, sliding_window)
    torch.testing.assert_close(out, expected, atol=FP32_ATOL, rtol=FP32_RTOL)
