"""FlashAttention-style backend: slot-mapping tail fill, cascade split and heuristic, attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.reference.backends.flash_attn import (
    FlashAttentionBackend,
    FlashAttentionImpl,
    FlashAttentionMetadata,
    FlashAttentionMetadataBuilder,
    use_cascade_attention,
)
from harness.reference.backends.utils import compute_cascade_attn_prefix_len
from harness.reference.batch import Batch, make_batch
from harness.reference.oracle import FP32_ATOL, FP32_RTOL

from .batches import expected_attention, make_kv, new_tokens, write_history


def _builder(batch: Batch, device: str = "cpu") -> FlashAttentionMetadataBuilder:
    return FlashAttentionMetadataBuilder(batch.spec, batch.block_table, batch.vllm_config, device)


def test_kv_cache_shape_and_name() -> None:
    assert FlashAttentionBackend.get_kv_cache_shape(10, 16, 8, 128) == (2, 10, 16, 8, 128)
    assert FlashAttentionBackend.get_name() == "FLASH_ATTN_VLLM_V1"
    assert FlashAttentionBackend.get_builder_cls() is FlashAttentionMetadataBuilder


def test_block_size_and_head_size_are_checked_as_vllm_does() -> None:
    with pytest.raises(ValueError, match=r"^Block size must be a multiple of 16\.$"):
        FlashAttentionBackend.get_kv_cache_shape(10, 8, 8, 128)
    with pytest.raises(ValueError, match="Head size 8 is not supported by FlashAttention"):
        FlashAttentionImpl(4, 8, 1.0, 2)


def test_slot_mapping_is_copied_and_unused_tail_filled_with_minus_one() -> None:
    batch = make_batch([2, 0], [5, 3])
    batch.block_table.slot_mapping.fill_(999)  # stale values from an earlier, larger step
    md = _builder(batch).build(0, batch.common)
    n = batch.common.num_actual_tokens
    expected = torch.cat([batch.slots(0, range(2, 7)), batch.slots(1, range(3))])
    assert md.slot_mapping.tolist() == expected.tolist()
    assert batch.block_table.slot_mapping[:n].tolist() == expected.tolist()
    tail = batch.block_table.slot_mapping[n:]
    assert tail.numel() > 0 and (tail == -1).all()


def test_build_fields() -> None:
    batch = make_batch([2, 0, 6], [5, 3, 1])
    md = _builder(batch).build(0, batch.common)
    assert (md.num_actual_tokens, md.max_query_len, md.max_seq_len) == (9, 5, 7)
    assert md.query_start_loc.tolist() == [0, 5, 8, 9]
    assert md.seq_lens.tolist() == [7, 3, 7]
    assert md.block_table.shape[0] == 3
    assert not md.use_cascade and md.cu_prefix_query_lens is None


def test_cascade_split_values() -> None:
    # Three requests share 2 blocks (32 tokens) of prefix; seq lens 36, 34, 33.
    batch = make_batch([35, 33, 32], [1, 1, 1], shared_prefix_blocks=2)
    md = _builder(batch).build(32, batch.common)
    assert md.use_cascade and md.common_prefix_len == 32
    assert md.cu_prefix_query_lens is not None and md.cu_prefix_query_lens.tolist() == [0, 3]
    assert md.prefix_kv_lens is not None and md.prefix_kv_lens.tolist() == [32]
    assert md.suffix_kv_lens is not None and md.suffix_kv_lens.tolist() == [4, 2, 1]
    with pytest.raises(ValueError, match="multiple of block_size=16"):
        _builder(batch).build(24, batch.common)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"common_prefix_len": 255}, False),  # prefix too short
        ({"use_sliding_window": True}, False),
        ({"use_alibi": True}, False),
        ({"query_lens": np.ones(7, np.int32)}, False),  # fewer than 8 requests
        ({"query_lens": np.full(8, 4, np.int32)}, True),  # not all decodes: no FlashDecoding
        ({"num_query_heads": 8}, True),  # MHA (1 query per KV head): no FlashDecoding
        # All decodes, GQA 4: cascade 1 wave x 8 prefix tiles vs FlashDecoding 512 CTAs x 8 tiles
        # over 132 SMs = 32 waves -> cascade wins.
        ({"query_lens": np.ones(64, np.int32)}, True),
        # 8 decodes: FlashDecoding needs only cdiv(64 * 8, 132) = 4 waves < 8 -> no cascade.
        ({"query_lens": np.ones(8, np.int32)}, False),
    ],
)
def test_use_cascade_attention_heuristic(kwargs: dict[str, object], expected: bool) -> None:
    args: dict[str, object] = {
        "common_prefix_len": 1024,
        "query_lens": np.ones(64, np.int32),
        "num_query_heads": 32,
        "num_kv_heads": 8,
        "use_alibi": False,
        "use_sliding_window": False,
        "num_sms": 132,
    }
    args.update(kwargs)
    assert use_cascade_attention(**args) is expected  # type: ignore[arg-type]


def test_cascade_prefix_len_is_capped_by_computed_tokens_and_rounded_to_block_size() -> None:
    batch = make_batch([30] * 8, [4] * 8, block_size=16, num_blocks=256)
    builder = _builder(batch)
    computed = np.array([1000, 1200, 1500, 1000, 1001, 1111, 1300, 1400], np.int32)
    scheduled = np.full(8, 4, np.int32)
    got = compute_cascade_attn_prefix_len(builder, scheduled, computed, 100, num_query_heads=4)
    assert got == 992  # min(100 * 16, 1000) rounded down to a multiple of 16
    # Seven requests: the heuristic declines and the prefix length is 0.
    assert compute_cascade_attn_prefix_len(builder, scheduled[:7], computed[:7], 100, 4) == 0
    assert compute_cascade_attn_prefix_len(builder, scheduled, computed, 0, 4) == 0


def _run(
    batch: Batch, sliding_window: int | None = None, common_prefix_len: int = 0, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, FlashAttentionMetadata]:
    """Forward through the backend (padded by 2 tokens) and the dense expectation."""
    md = _builder(batch).build(common_prefix_len, batch.common)
    kv_cache = torch.zeros(FlashAttentionBackend.get_kv_cache_shape(64, 16, 2, 64))
    ks, vs = make_kv(batch, 2, 64, prefix_len=common_prefix_len, seed=seed)
    write_history(batch, ks, vs, kv_cache[0], kv_cache[1])
    n = batch.common.num_actual_tokens
    query = torch.randn(n + 2, 4, 64, generator=torch.Generator().manual_seed(seed))
    pad = torch.zeros(2, 2, 64)
    impl = FlashAttentionImpl(4, 64, 64**-0.5, 2, sliding_window=sliding_window)
    out = impl.forward(
        query,
        torch.cat([new_tokens(batch, ks), pad]),
        torch.cat([new_tokens(batch, vs), pad]),
        kv_cache,
        md,
    )
    expected = expected_attention(batch, query[:n], ks, vs, 64**-0.5, sliding_window)
    assert out.shape == (n + 2, 4 * 64) and out[n:].abs().sum() == 0
    return out[:n], expected, md


@pytest.mark.parametrize("sliding_window", [None, 3, 20])
def test_forward_equals_dense_on_mixed_batch(sliding_window: int | None) -> None:
    batch = make_batch([0, 21, 3, 7, 29], [6, 1, 18, 1, 2], sliding_window=sliding_window, seed=3)
    out, expected, _ = _run(batch, sliding_window)
    torch.testing.assert_close(out, expected, atol=FP32_ATOL, rtol=FP32_RTOL)


def test_cascade_forward_equals_dense() -> None:
    batch = make_batch([33, 44, 32, 40], [1, 3, 1, 2], shared_prefix_blocks=2, seed=5)
    out, expected, md = _run(batch, common_prefix_len=32)
    assert md.use_cascade
    torch.testing.assert_close(out, expected, atol=FP32_ATOL, rtol=FP32_RTOL)


def test_profile_run_without_metadata_returns_zeros_and_writes_nothing() -> None:
    impl = FlashAttentionImpl(4, 64, 1.0, 2)
    kv_cache = torch.zeros(2, 4, 16, 2, 64)
    out = impl.forward(
        torch.randn(5, 4, 64), torch.randn(5, 2, 64), torch.randn(5, 2, 64), kv_cache, None
    )
    assert out.shape == (5, 256) and out.abs().sum() == 0 and kv_cache.abs().sum() == 0


def test_build_on_meta_device_gives_shapes() -> None:
    batch = make_batch([33, 32, 35], [5, 3, 1], shared_prefix_blocks=2, device="meta")
    md = _builder(batch, "meta").build(32, batch.common)
    assert md.slot_mapping.is_meta and md.slot_mapping.shape == (9,)
    assert md.block_table.is_meta and md.block_table.shape[0] == 3
    assert md.suffix_kv_lens is not None and md.suffix_kv_lens.shape == (3,)
    assert md.max_seq_len == 38
    impl = FlashAttentionImpl(4, 64, 1.0, 2)
    q = torch.empty(9, 4, 64, device="meta")
    kv = torch.empty(2, 9, 2, 64, device="meta")
    out = impl.forward(q, kv[0], kv[1], torch.empty(2, 64, 16, 2, 64, device="meta"), md)
    assert out.is_meta and out.shape == (9, 256)
