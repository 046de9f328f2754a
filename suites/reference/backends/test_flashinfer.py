"""FlashInfer-style backend: decode-first reordering, CSR page tensors, the lazy workspace, config
discipline, attention, the meta device, and (GPU only) real FlashInfer plans."""

from __future__ import annotations

import dataclasses
import importlib.util
import warnings

import pytest
import torch

from harness.reference.backends.flashinfer import (
    FLASHINFER_WORKSPACE_BUFFER_SIZE,
    FlashInferBackend,
    FlashInferImpl,
    FlashInferMetadata,
    FlashInferMetadataBuilder,
    get_per_layer_parameters,
    paged_kv_to_block_table,
    plan_calls,
)
from harness.reference.batch import Batch, make_batch
from harness.reference.config import (
    ConfigReadOutsideContextWarning,
    VllmConfig,
    get_current_vllm_config,
)
from harness.reference.oracle import FP32_ATOL, FP32_RTOL

from .batches import (
    FakeInputBatch,
    FakeSchedulerOutput,
    expected_attention,
    make_kv,
    new_tokens,
    write_history,
)


def _builder(batch: Batch, device: str = "cpu") -> FlashInferMetadataBuilder:
    return FlashInferMetadataBuilder(batch.spec, batch.block_table, batch.vllm_config, device)


def test_kv_cache_shape_and_name() -> None:
    assert FlashInferBackend.get_kv_cache_shape(10, 16, 8, 128) == (10, 2, 16, 8, 128)
    assert FlashInferBackend.get_name() == "FLASHINFER_VLLM_V1"


def test_head_sizes_outside_64_128_256_are_rejected_at_build() -> None:
    batch = make_batch([3, 0], [1, 4], head_size=32)
    with pytest.raises(
        ValueError, match=r"^Only \[64, 128, 256\] are supported for head_dim, received 32\.$"
    ):
        _builder(batch).build(0, batch.common)


def test_layers_with_different_windows_fail_the_first_plan() -> None:
    """vLLM 0.9.0 checks every layer of the model, whatever the grouping: no hybrid FlashInfer."""
    batch = make_batch([3, 0], [1, 4])
    hybrid = dataclasses.replace(
        batch.vllm_config.model_config,
        sliding_window=8,
        layer_types=("full_attention", "sliding_attention"),
    )
    config = dataclasses.replace(batch.vllm_config, model_config=hybrid)
    params = get_per_layer_parameters(config)
    assert [p.window_left for p in params.values()] == [-1, 7]
    builder = FlashInferMetadataBuilder(batch.spec, batch.block_table, config, "cpu")
    with pytest.raises(AssertionError, match="all layers share the same values"):
        builder.build(0, batch.common)


def test_slot_mapping_is_a_fresh_copy_and_the_device_buffer_is_untouched() -> None:
    batch = make_batch([2, 0], [1, 3])
    batch.block_table.slot_mapping.fill_(999)
    md = _builder(batch).build(0, batch.common)
    expected = torch.cat([batch.slots(0, range(2, 3)), batch.slots(1, range(3))])
    assert md.slot_mapping.tolist() == expected.tolist() and md.slot_mapping.dtype == torch.int64
    assert (batch.block_table.slot_mapping == 999).all()


def test_plan_calls_are_vllm_0_9_0s() -> None:
    batch = make_batch([8, 2, 3], [1, 1, 5], num_heads=16, num_kv_heads=2)
    builder = _builder(batch)
    md = builder.build(0, batch.common)
    params = builder._get_global_hyperparameters()  # pyright: ignore[reportPrivateUsage]
    prefill, decode = plan_calls(md, params, builder.use_tensor_cores)
    assert (prefill.wrapper, prefill.init_args, prefill.init_kwargs) == ("prefill", ("NHD",), {})
    assert prefill.args[0].tolist() == [0, 5]  # qo_indptr of the prefills, rebased
    assert prefill.args[4:] == (16, 2, 64, 16)
    assert prefill.kwargs == {
        "causal": True,
        "sm_scale": 64**-0.5,
        "window_left": -1,
        "logits_soft_cap": None,
        "q_data_type": torch.float32,
        "kv_data_type": torch.float32,
    }
    assert (decode.wrapper, decode.init_kwargs) == ("decode", {"use_tensor_cores": True})
    assert decode.args[0].tolist() == [0, 1, 2] and decode.kwargs["pos_encoding_mode"] == "NONE"
    cascade_batch = make_batch([33, 35, 32], [1, 1, 1], shared_prefix_blocks=2)
    cascade_md = _builder(cascade_batch).build(32, cascade_batch.common)
    (cascade,) = plan_calls(cascade_md, params, False)
    assert (cascade.wrapper, cascade.init_args) == ("cascade", (2, "NHD"))
    assert cascade.args[0][0].tolist() == [0, 3] and "kv_data_type" not in cascade.kwargs


@pytest.mark.parametrize(
    ("scheduled", "expected_order", "expected_swaps"),
    [
        # decodes at 1, 3, 4 move to the front: 4 <-> 0 first, then 3 <-> 2.
        ([7, 1, 5, 1, 1], ["r4", "r1", "r3", "r2", "r0"], [(0, 4), (2, 3)]),
        ([1, 1, 9, 2], ["r0", "r1", "r2", "r3"], []),  # already decode-first
        ([1, 1, 1], ["r0", "r1", "r2"], []),  # only decodes
        ([3, 4], ["r0", "r1"], []),  # only prefills
        ([5, 1], ["r1", "r0"], [(0, 1)]),
    ],
)
def test_reorder_batch_moves_decodes_to_the_front(
    scheduled: list[int], expected_order: list[str], expected_swaps: list[tuple[int, int]]
) -> None:
    batch = make_batch([4] * len(scheduled), scheduled)
    input_batch = FakeInputBatch([f"r{i}" for i in range(len(scheduled))])
    output = FakeSchedulerOutput({f"r{i}": n for i, n in enumerate(scheduled)})
    modified = _builder(batch).reorder_batch(input_batch, output)
    assert input_batch.req_ids == expected_order
    assert input_batch.swaps == expected_swaps
    assert modified is bool(expected_swaps)


def test_build_rejects_a_batch_that_is_not_decode_first() -> None:
    batch = make_batch([0, 5], [6, 1])
    with pytest.raises(ValueError, match=r"not decode-first: query lengths \[6, 1\]"):
        _builder(batch).build(0, batch.common)


def test_paged_kv_tensors_hand_computed() -> None:
    # block_size 4; seq lens 9 (3 pages, 1 in the last), 3 (1 page), 8 (2 full pages).
    batch = make_batch([8, 2, 3], [1, 1, 5], block_size=4)
    batch.block_table.add_row([7, 3, 9], 0)
    batch.block_table.add_row([5], 1)
    batch.block_table.add_row([2, 8], 2)
    batch.block_table.commit(3)
    md = _builder(batch).build(0, batch.common)
    assert md.paged_kv_indptr.tolist() == [0, 3, 4, 6]
    assert md.paged_kv_indices.tolist() == [7, 3, 9, 5, 2, 8]
    assert md.paged_kv_last_page_len.tolist() == [1, 3, 4]
    assert md.qo_indptr.tolist() == md.query_start_loc.tolist() == [0, 1, 2, 7]
    assert (md.num_decodes, md.num_decode_tokens, md.num_prefills, md.num_prefill_tokens) == (
        2,
        2,
        1,
        5,
    )
    assert all(t.dtype == torch.int32 for t in (md.paged_kv_indptr, md.paged_kv_indices))


def test_paged_kv_to_block_table_inverts_the_csr_pages() -> None:
    """Rows are zero-padded; an ``indptr`` that starts past 0 (the prefills' half) reads from there
    on, and a request with no pages gets an all-zero row."""
    indices = torch.tensor([7, 3, 9, 5, 2, 8], dtype=torch.int32)
    prefill_half = torch.tensor([3, 4, 4, 6], dtype=torch.int32)
    table, seq_lens = paged_kv_to_block_table(
        prefill_half, indices, torch.tensor([2, 1, 4], dtype=torch.int32), page_size=4
    )
    assert table.tolist() == [[5, 0], [0, 0], [2, 8]]
    assert table.dtype == torch.int32
    assert seq_lens.tolist() == [2, -3, 8]  # (pages - 1) * page_size + last, as the kernels read
    empty, lens = paged_kv_to_block_table(
        torch.tensor([0], dtype=torch.int32), indices[:0], indices[:0], page_size=4
    )
    assert empty.shape == (0, 0) and lens.tolist() == []


def test_cascade_moves_the_shared_prefix_out_of_each_request() -> None:
    batch = make_batch([9, 12, 8], [1, 1, 1], block_size=4, shared_prefix_blocks=2)
    md = _builder(batch).build(8, batch.common)
    prefix = batch.block_ids[0][:2]
    assert md.use_cascade
    assert md.shared_kv_page_indices is not None
    assert md.shared_kv_page_indices.tolist() == prefix
    assert md.shared_qo_indptr is not None and md.shared_qo_indptr.tolist() == [0, 3]
    assert md.shared_kv_page_indptr is not None and md.shared_kv_page_indptr.tolist() == [0, 2]
    assert md.shared_kv_last_page_len is not None and md.shared_kv_last_page_len.tolist() == [4]
    # Suffix lengths 2, 5, 1 -> pages 1, 2, 1, none of them a prefix page.
    assert md.paged_kv_indptr.tolist() == [0, 1, 3, 4]
    assert md.paged_kv_indices.tolist() == [b for ids in batch.block_ids for b in ids[2:]]
    assert md.paged_kv_last_page_len.tolist() == [2, 1, 1]


def test_workspace_buffer_is_created_lazily_exactly_once() -> None:
    batch = make_batch([3, 0], [1, 4], device="meta")
    builder = _builder(batch, "meta")
    assert builder._workspace_buffer is None  # pyright: ignore[reportPrivateUsage]
    builder.build(0, batch.common)
    first = builder._get_workspace_buffer()  # pyright: ignore[reportPrivateUsage]
    assert first.shape == (FLASHINFER_WORKSPACE_BUFFER_SIZE,) == (256 * 1024 * 1024,)
    assert first.dtype == torch.uint8 and first.is_meta
    builder.build(0, batch.common)
    assert builder._get_workspace_buffer() is first  # pyright: ignore[reportPrivateUsage]


def test_builder_made_outside_the_config_context_uses_the_config_it_was_given() -> None:
    batch = make_batch([3, 0], [1, 4], num_heads=8, num_kv_heads=2)
    assert batch.vllm_config != VllmConfig()  # differs from what a global read would return
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigReadOutsideContextWarning)
        builder = _builder(batch)
        md = builder.build(0, batch.common)
    assert md.num_qo_heads == 8 and md.num_kv_heads == 2
    assert builder._get_global_hyperparameters().sm_scale == 64**-0.5  # pyright: ignore[reportPrivateUsage]


def test_a_builder_reading_the_global_config_is_caught() -> None:
    """The check above can fail: a variant reading the global config trips the warning."""

    class GlobalConfigReader(FlashInferMetadataBuilder):
        def _get_vllm_config(self) -> VllmConfig:
            return get_current_vllm_config()

    batch = make_batch([3, 0], [1, 4], num_heads=8, num_kv_heads=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigReadOutsideContextWarning)
        with pytest.raises(ConfigReadOutsideContextWarning):
            GlobalConfigReader(batch.spec, batch.block_table, batch.vllm_config, "cpu")


def _run(
    batch: Batch, sliding_window: int | None = None, common_prefix_len: int = 0
) -> tuple[torch.Tensor, torch.Tensor, FlashInferMetadata]:
    md = _builder(batch).build(common_prefix_len, batch.common)
    kv_cache = torch.zeros(FlashInferBackend.get_kv_cache_shape(64, 16, 2, 64))
    ks, vs = make_kv(batch, 2, 64, prefix_len=common_prefix_len, seed=7)
    write_history(batch, ks, vs, kv_cache[:, 0], kv_cache[:, 1])
    n = batch.common.num_actual_tokens
    query = torch.randn(n, 4, 64, generator=torch.Generator().manual_seed(7))
    impl = FlashInferImpl(4, 64, 64**-0.5, 2, sliding_window=sliding_window)
    out = impl.forward(query, new_tokens(batch, ks), new_tokens(batch, vs), kv_cache, md)
    return out, expected_attention(batch, query, ks, vs, 64**-0.5, sliding_window), md


@pytest.mark.parametrize("sliding_window", [None, 2, 18])
def test_forward_equals_dense_after_reordering(sliding_window: int | None) -> None:
    scheduled, computed = [6, 1, 20, 1, 3], [0, 21, 3, 7, 33]
    input_batch = FakeInputBatch([f"r{i}" for i in range(5)])
    output = FakeSchedulerOutput({f"r{i}": n for i, n in enumerate(scheduled)})
    seed_batch = make_batch(computed, scheduled, sliding_window=sliding_window)
    assert _builder(seed_batch).reorder_batch(input_batch, output)
    order = [int(r[1:]) for r in input_batch.req_ids]
    batch = make_batch(
        [computed[i] for i in order], [scheduled[i] for i in order], sliding_window=sliding_window
    )
    out, expected, md = _run(batch, sliding_window)
    assert (md.num_decodes, md.num_prefills) == (2, 3)
    torch.testing.assert_close(out, expected, atol=FP32_ATOL, rtol=FP32_RTOL)


def test_cascade_forward_equals_dense() -> None:
    batch = make_batch([33, 44, 32, 40], [1, 1, 3, 2], shared_prefix_blocks=2, seed=2)
    out, expected, md = _run(batch, common_prefix_len=32)
    assert md.use_cascade
    torch.testing.assert_close(out, expected, atol=FP32_ATOL, rtol=FP32_RTOL)


def test_build_on_meta_device_gives_shapes() -> None:
    batch = make_batch([8, 2, 3], [1, 1, 5], block_size=4, device="meta")
    md = _builder(batch, "meta").build(0, batch.common)
    assert md.paged_kv_indices.is_meta and md.paged_kv_indices.shape == (6,)
    assert md.paged_kv_indptr.shape == (4,) and md.paged_kv_last_page_len.shape == (3,)
    assert md.slot_mapping.is_meta and md.slot_mapping.shape == (7,)
    assert md.prefill_wrapper is None and md.decode_wrapper is None


def _cuda_flashinfer() -> bool:
    return torch.cuda.is_available() and importlib.util.find_spec("flashinfer") is not None


@pytest.mark.gpu
@pytest.mark.skipif(
    not _cuda_flashinfer(), reason="needs CUDA and flashinfer-python (make test-gpu)"
)
def test_real_flashinfer_wrappers_match_the_oracle() -> None:  # pragma: no cover - GPU only
    computed, scheduled = [5, 7, 3, 0], [1, 1, 4, 6]
    bf16 = torch.bfloat16
    batch = make_batch(computed, scheduled, device="cuda", dtype=bf16)
    md = _builder(batch, "cuda").build(0, batch.common)
    assert md.decode_wrapper is not None and md.prefill_wrapper is not None
    shape = FlashInferBackend.get_kv_cache_shape(64, 16, 2, 64)
    kv_cache = torch.zeros(shape, device="cuda", dtype=bf16)
    ks, vs = make_kv(batch, 2, 64)
    ks, vs = [k.cuda().to(bf16) for k in ks], [v.cuda().to(bf16) for v in vs]
    write_history(batch, ks, vs, kv_cache[:, 0], kv_cache[:, 1])
    n = batch.common.num_actual_tokens
    query = torch.randn(n, 4, 64, device="cuda", dtype=bf16)
    impl = FlashInferImpl(4, 64, 64**-0.5, 2)
    expected = impl.forward(query, new_tokens(batch, ks), new_tokens(batch, vs), kv_cache, md)
    decode = md.decode_wrapper.run(query[: md.num_decode_tokens], kv_cache)
    prefill = md.prefill_wrapper.run(query[md.num_decode_tokens :], kv_cache)
    got = torch.cat([decode, prefill]).flatten(1)
    torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)
