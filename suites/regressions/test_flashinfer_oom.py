"""``flashinfer-oom``: per step, every layer's KV cache is copied (one layer's KV cache each)."""

from __future__ import annotations

import pytest
import torch

from harness.memory.tracker import MemoryTracker
from harness.reference.config import CacheConfig, SchedulerConfig, VllmConfig, get_model_config
from harness.reference.kv_cache_utils import kv_cache_config_for_num_blocks
from harness.reference.runner import ModelRunner
from harness.reference.scheduler import Request, Scheduler
from harness.regressions.flashinfer_oom import FlashInferOOMBackend, FlashInferOOMMetadataBuilder


def _runner(num_blocks: int) -> tuple[ModelRunner, Scheduler]:
    config = VllmConfig(
        model_config=get_model_config("tiny"),
        cache_config=CacheConfig(),
        scheduler_config=SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=64),
    )
    runner = ModelRunner(config, "cpu", FlashInferOOMBackend)
    kv_cache_config = kv_cache_config_for_num_blocks(config, runner.get_kv_cache_spec(), num_blocks)
    runner.initialize_kv_cache(kv_cache_config)
    return runner, Scheduler(config.scheduler_config, kv_cache_config)


@pytest.mark.parametrize("num_blocks", [40, 80])
def test_each_step_copies_every_layer_cache(num_blocks: int) -> None:
    runner, scheduler = _runner(num_blocks)  # initialize_kv_cache bound the caches
    builder = runner.attn_metadata_builders[0]
    assert isinstance(builder, FlashInferOOMMetadataBuilder)
    assert set(builder.kv_caches) == set(runner.kv_caches)
    scheduler.add_request(Request("r", [1] * 20, 2))
    with MemoryTracker(devices=("cpu",)) as tracker, torch.inference_mode():
        output = scheduler.schedule()
        runner.execute_model(output)
    copies = builder.paged_kv_cache_hnd
    assert set(copies) == set(runner.kv_caches)
    for name, copy in copies.items():
        cache = runner.kv_caches[name]
        assert copy.shape == cache.permute(0, 1, 3, 2, 4).shape and copy.is_contiguous()
        assert copy.untyped_storage().nbytes() == cache.untyped_storage().nbytes()
        assert copy.data_ptr() != cache.data_ptr()  # a copy, made before this step's K/V writes
    # The tracker sees the copies: one layer's KV cache each, from the regression's source line.
    sizes = [
        a.nbytes
        for a in tracker.ledger.live_allocations()
        if a.source and "flashinfer_oom" in a.source.path
    ]
    assert sizes == [num_blocks * 2048] * len(copies)


def test_initialize_kv_cache_binds_each_group_its_own_caches() -> None:
    """The runner itself hands every KV-cache-aware builder its group's caches, and only those."""
    config = VllmConfig(
        model_config=get_model_config("tiny-hybrid"),
        cache_config=CacheConfig(),
        scheduler_config=SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=64),
    )
    runner = ModelRunner(config, "cpu", FlashInferOOMBackend)
    kv_cache_config = kv_cache_config_for_num_blocks(config, runner.get_kv_cache_spec(), 40)
    runner.initialize_kv_cache(kv_cache_config)
    groups = kv_cache_config.kv_cache_groups
    assert len(groups) > 1
    for builder, group in zip(runner.attn_metadata_builders, groups, strict=True):
        assert isinstance(builder, FlashInferOOMMetadataBuilder)
        assert list(builder.kv_caches) == list(group.layer_names)
        for name, cache in builder.kv_caches.items():
            assert cache is runner.kv_caches[name]
