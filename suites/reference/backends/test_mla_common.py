"""MLA common builder: the ``_build_decode`` keyword contract for EVERY subclass (and proof that the
check catches drift), decode-first reordering, attention over the latent, the meta device."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import torch

import harness.reference.backends as backends
from harness.reference.backends.mla.common import (
    MLACommonBackend,
    MLACommonDecodeMetadata,
    MLACommonImpl,
    MLACommonMetadata,
    MLACommonMetadataBuilder,
)
from harness.reference.batch import Batch, make_batch
from harness.reference.oracle import FP32_ATOL, FP32_RTOL, concat_and_cache_mla

from .batches import (
    FakeInputBatch,
    FakeSchedulerOutput,
    expected_attention,
    new_tokens,
)

KV_LORA_RANK, QK_ROPE_HEAD_DIM = 512, 64  # DeepSeek's: vLLM 0.9.0 accepts only 576
HEAD_SIZE = KV_LORA_RANK + QK_ROPE_HEAD_DIM


def _all_subclasses(cls: type[Any]) -> set[type[Any]]:
    found = {cls}
    for sub in cls.__subclasses__():
        found |= _all_subclasses(sub)
    return found


def _our_mla_builders() -> list[type[MLACommonMetadataBuilder[Any]]]:
    """Every reference MLA builder: subclasses defined under ``harness.reference`` plus the
    registry's. The catalog's deliberately broken variants are left out, whatever was imported
    first (collection order differs under ``-n``)."""
    registered = {
        backends.get_attn_backend(name).get_builder_cls() for name in backends.available_backends()
    }
    subclasses = {
        c
        for c in _all_subclasses(MLACommonMetadataBuilder)
        if c.__module__.startswith("harness.reference.")
    }
    mla = {c for c in registered if issubclass(c, MLACommonMetadataBuilder)} | subclasses
    return sorted(mla, key=lambda c: c.__qualname__)


def _mla_batch(device: str = "cpu", **kwargs: Any) -> Batch:
    defaults: dict[str, Any] = {"num_computed": [5, 7, 0, 3], "num_scheduled": [1, 1, 6, 4]}
    defaults.update(kwargs)
    defaults.setdefault("head_size", HEAD_SIZE)
    return make_batch(use_mla=True, num_kv_heads=1, device=device, **defaults)


def test_every_mla_builder_is_found() -> None:
    names = {c.__name__ for c in _our_mla_builders()}
    assert {
        "MLACommonMetadataBuilder",
        "FlashMLAMetadataBuilder",
        "AiterMLAMetadataBuilder",
    } <= names


@pytest.mark.parametrize("builder_cls", _our_mla_builders(), ids=lambda c: c.__name__)
def test_build_decode_keyword_contract(builder_cls: type[MLACommonMetadataBuilder[Any]]) -> None:
    """``build()`` calls ``_build_decode(block_table_tensor=..., seq_lens=...)`` by keyword."""
    signature = inspect.signature(builder_cls._build_decode)  # pyright: ignore[reportPrivateUsage]
    signature.bind(object(), block_table_tensor=torch.zeros(1, 1), seq_lens=torch.zeros(1))
    batch = _mla_batch()
    builder = builder_cls(batch.spec, batch.block_table, batch.vllm_config, "cpu")
    md = builder.build(0, batch.common)
    assert isinstance(md, MLACommonMetadata)
    assert md.decode is not None and md.decode.seq_lens.tolist() == [6, 8]
    assert md.decode.block_table.shape[0] == 2
    assert md.prefill is not None and md.prefill.query_start_loc.tolist() == [0, 6, 10]


class DriftedMLAMetadataBuilder(MLACommonMetadataBuilder[MLACommonMetadata[Any]]):
    """The vLLM PR #17483 ROCm bug: the override kept the old ``block_table`` name."""

    def _build_decode(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, block_table: torch.Tensor, seq_lens: torch.Tensor
    ) -> MLACommonDecodeMetadata:
        return MLACommonDecodeMetadata(block_table=block_table, seq_lens=seq_lens)


def test_the_contract_check_catches_drift() -> None:
    signature = inspect.signature(DriftedMLAMetadataBuilder._build_decode)  # pyright: ignore[reportPrivateUsage]
    with pytest.raises(TypeError, match="missing a required argument: 'block_table'"):
        signature.bind(object(), block_table_tensor=torch.zeros(1, 1), seq_lens=torch.zeros(1))
    batch = _mla_batch()
    builder = DriftedMLAMetadataBuilder(batch.spec, batch.block_table, batch.vllm_config, "cpu")
    expected = (
        r"DriftedMLAMetadataBuilder\._build_decode\(\) "
        r"got an unexpected keyword argument 'block_table_tensor'"
    )
    with pytest.raises(TypeError, match=expected):
        builder.build(0, batch.common)


def test_drift_only_crashes_when_the_batch_has_decodes() -> None:
    """Why CI missed it: an all-prefill batch never calls ``_build_decode``."""
    batch = _mla_batch(num_computed=[0, 2], num_scheduled=[5, 3])
    builder = DriftedMLAMetadataBuilder(batch.spec, batch.block_table, batch.vllm_config, "cpu")
    assert builder.build(0, batch.common).decode is None


def test_kv_cache_shape() -> None:
    assert MLACommonBackend.get_kv_cache_shape(10, 16, 1, 576) == (10, 16, 576)


def test_head_sizes_other_than_576_are_rejected_at_build() -> None:
    batch = _mla_batch(head_size=8)
    builder = MLACommonMetadataBuilder(batch.spec, batch.block_table, batch.vllm_config, "cpu")
    with pytest.raises(
        ValueError, match=r"^Only \[576\] are supported for head_dim, received 8\.$"
    ):
        builder.build(0, batch.common)


def test_slot_mapping_is_a_fresh_copy_and_the_device_buffer_is_untouched() -> None:
    batch = _mla_batch()
    batch.block_table.slot_mapping.fill_(999)
    builder = MLACommonMetadataBuilder(batch.spec, batch.block_table, batch.vllm_config, "cpu")
    md = builder.build(0, batch.common)
    n = batch.common.num_actual_tokens
    assert md.slot_mapping.tolist() == batch.block_table.slot_mapping_cpu[:n].tolist()
    assert (batch.block_table.slot_mapping == 999).all()


@pytest.mark.parametrize("builder_cls", _our_mla_builders(), ids=lambda c: c.__name__)
def test_reorder_batch_is_decode_first(builder_cls: type[MLACommonMetadataBuilder[Any]]) -> None:
    batch = _mla_batch()
    builder = builder_cls(batch.spec, batch.block_table, batch.vllm_config, "cpu")
    input_batch = FakeInputBatch(["a", "b", "c", "d"])
    output = FakeSchedulerOutput({"a": 3, "b": 1, "c": 2, "d": 1})
    assert builder.reorder_batch(input_batch, output)
    assert input_batch.req_ids == ["d", "b", "c", "a"]


@pytest.mark.parametrize("builder_cls", _our_mla_builders(), ids=lambda c: c.__name__)
def test_forward_equals_dense_mqa_over_the_latent(
    builder_cls: type[MLACommonMetadataBuilder[Any]],
) -> None:
    batch = _mla_batch()
    md = builder_cls(batch.spec, batch.block_table, batch.vllm_config, "cpu").build(0, batch.common)
    g = torch.Generator().manual_seed(0)
    kv_c = [torch.randn(n, KV_LORA_RANK, generator=g) for n in batch.seq_lens]
    k_pe = [torch.randn(n, QK_ROPE_HEAD_DIM, generator=g) for n in batch.seq_lens]
    kv_cache = torch.zeros(MLACommonBackend.get_kv_cache_shape(64, 16, 1, HEAD_SIZE))
    for i, c in enumerate(batch.num_computed):
        concat_and_cache_mla(kv_c[i][:c], k_pe[i][:c], kv_cache, batch.slots(i, range(c)))
    n = batch.common.num_actual_tokens
    query = torch.randn(n, 4, HEAD_SIZE, generator=g)
    impl = MLACommonImpl(
        4, HEAD_SIZE, 0.3, 1, kv_lora_rank=KV_LORA_RANK, qk_rope_head_dim=QK_ROPE_HEAD_DIM
    )
    out = impl.forward(query, new_tokens(batch, kv_c), new_tokens(batch, k_pe), kv_cache, md)
    keys = [torch.cat([c, p], dim=-1).unsqueeze(1) for c, p in zip(kv_c, k_pe, strict=True)]
    values = [c.unsqueeze(1) for c in kv_c]
    expected = expected_attention(batch, query, keys, values, 0.3)
    assert out.shape == (n, 4 * KV_LORA_RANK)
    torch.testing.assert_close(out, expected, atol=FP32_ATOL, rtol=FP32_RTOL)


@pytest.mark.parametrize("builder_cls", _our_mla_builders(), ids=lambda c: c.__name__)
def test_build_on_meta_device(builder_cls: type[MLACommonMetadataBuilder[Any]]) -> None:
    batch = _mla_batch("meta")
    md = builder_cls(batch.spec, batch.block_table, batch.vllm_config, "meta").build(
        0, batch.common
    )
    assert md.slot_mapping.is_meta and md.slot_mapping.shape == (12,)
    assert md.decode is not None and md.decode.block_table.is_meta
    assert md.prefill is not None and md.prefill.seq_lens.shape == (2,)
    assert (md.num_decodes, md.num_decode_tokens, md.num_prefills) == (2, 2, 2)


def test_profile_run_returns_zeros() -> None:
    impl = MLACommonImpl(4, 8, 1.0, 1, kv_lora_rank=6, qk_rope_head_dim=2)
    out = impl.forward(
        torch.randn(3, 4, 8), torch.randn(3, 6), torch.randn(3, 2), torch.zeros(4, 4, 8), None
    )
    assert out.shape == (3, 24) and out.abs().sum() == 0
