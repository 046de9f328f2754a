"""The builder contract every backend shares: explicit config only, default reorder_batch, and the
impl's argument checks."""

from __future__ import annotations

import warnings

import pytest
import torch

from harness.reference.backends import available_backends, get_attn_backend
from harness.reference.backends.flash_attn import FlashAttentionImpl, FlashAttentionMetadataBuilder
from harness.reference.batch import make_batch
from harness.reference.config import ConfigReadOutsideContextWarning

from .batches import FakeInputBatch, FakeSchedulerOutput


@pytest.mark.parametrize("name", available_backends())
def test_builders_never_read_the_global_config(name: str) -> None:
    """Constructed and built outside ``set_current_vllm_config``: any global read would warn."""
    use_mla = "MLA" in name
    batch = make_batch(
        [5, 0], [1, 6], num_heads=8, num_kv_heads=1 if use_mla else 2, use_mla=use_mla
    )
    builder_cls = get_attn_backend(name).get_builder_cls()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigReadOutsideContextWarning)
        builder = builder_cls(batch.spec, batch.block_table, batch.vllm_config, "cpu")
        builder.build(0, batch.common)
    assert builder.vllm_config is batch.vllm_config
    assert builder._get_vllm_config() is batch.vllm_config  # pyright: ignore[reportPrivateUsage]


def test_default_reorder_batch_leaves_the_batch_alone() -> None:
    batch = make_batch([0, 5], [6, 1])
    builder = FlashAttentionMetadataBuilder(batch.spec, batch.block_table, batch.vllm_config, "cpu")
    input_batch = FakeInputBatch(["a", "b"])
    assert not builder.reorder_batch(input_batch, FakeSchedulerOutput({"a": 6, "b": 1}))
    assert input_batch.req_ids == ["a", "b"] and input_batch.swaps == []


def test_impl_rejects_heads_that_do_not_group() -> None:
    with pytest.raises(ValueError, match="num_heads=6 is not a multiple of num_kv_heads=4"):
        FlashAttentionImpl(6, 8, 1.0, 4)


def test_device_is_normalised() -> None:
    batch = make_batch([0], [2])
    builder = FlashAttentionMetadataBuilder(batch.spec, batch.block_table, batch.vllm_config, "cpu")
    assert builder.device == torch.device("cpu")
