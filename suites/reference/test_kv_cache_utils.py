"""get_kv_cache_config: vLLM 0.9.0's unified grouping (default), per-type groups with the hybrid
KV cache manager, num_blocks arithmetic, the override, the insufficient-memory error; an exact
size (kv_cache_config_for_num_blocks)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from harness.reference.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from harness.reference.kv_cache_interface import FullAttentionSpec, KVCacheSpec, SlidingWindowSpec
from harness.reference.kv_cache_utils import (
    InsufficientKVCacheMemoryError,
    estimate_max_model_len,
    get_kv_cache_config,
    kv_cache_config_for_num_blocks,
)

CONFIG = VllmConfig(model_config=ModelConfig(max_model_len=64))
HYBRID_MANAGER = dataclasses.replace(
    CONFIG, scheduler_config=SchedulerConfig(disable_hybrid_kv_cache_manager=False)
)
FULL = FullAttentionSpec(16, 2, 8, torch.float32, False)  # 2 KiB pages
WINDOW = SlidingWindowSpec(16, 2, 8, torch.float32, False, sliding_window=8)


def _alternating(sliding: KVCacheSpec = WINDOW) -> dict[str, KVCacheSpec]:
    return {f"layers.{i}": FULL if i % 2 == 0 else sliding for i in range(4)}


def test_uniform_model_has_one_group() -> None:
    specs: dict[str, KVCacheSpec] = {f"layers.{i}": FULL for i in range(4)}
    config = get_kv_cache_config(CONFIG, specs, available_memory=1_000_000)
    assert config.num_blocks == 1_000_000 // 2048 // 4 == 122
    assert len(config.kv_cache_groups) == 1
    assert config.kv_cache_groups[0].layer_names == list(specs)
    assert {t.size for t in config.tensors.values()} == {122 * 2048}


def test_hybrid_model_is_one_unified_group_by_default() -> None:
    """vLLM 0.9.0: sliding layers become FullAttentionSpecs carrying the window; one group."""
    assert CONFIG.scheduler_config.disable_hybrid_kv_cache_manager
    specs = _alternating()
    config = get_kv_cache_config(CONFIG, specs, available_memory=1_000_000)
    (group,) = config.kv_cache_groups
    assert group.layer_names == list(specs)
    assert group.kv_cache_spec == dataclasses.replace(FULL, sliding_window=8)
    assert specs["layers.1"] is WINDOW  # the caller's dict is not rewritten


def test_hybrid_manager_makes_a_group_per_type() -> None:
    config = get_kv_cache_config(HYBRID_MANAGER, _alternating(), available_memory=1_000_000)
    assert [g.layer_names for g in config.kv_cache_groups] == [
        ["layers.0", "layers.2"],
        ["layers.1", "layers.3"],
    ]
    assert isinstance(config.kv_cache_groups[1].kv_cache_spec, SlidingWindowSpec)
    assert sum(t.size for t in config.tensors.values()) <= 1_000_000


def test_several_windows() -> None:
    other = dataclasses.replace(WINDOW, sliding_window=4)
    only_windows: dict[str, KVCacheSpec] = {"a": WINDOW, "b": other}
    with pytest.raises(NotImplementedError, match="disable_hybrid_kv_cache_manager=True"):
        get_kv_cache_config(CONFIG, only_windows, available_memory=1_000_000)
    assert len(get_kv_cache_config(HYBRID_MANAGER, only_windows, 1_000_000).kv_cache_groups) == 2
    # With a full layer the windows are unified into one group, whose merge refuses two windows.
    with pytest.raises(ValueError, match="must have the same window size"):
        get_kv_cache_config(CONFIG, {"f": FULL, **only_windows}, available_memory=1_000_000)


def test_num_gpu_blocks_override() -> None:
    config = dataclasses.replace(CONFIG, cache_config=CacheConfig(num_gpu_blocks_override=7))
    kv_cache_config = get_kv_cache_config(config, {"a": FULL, "b": FULL}, 1_000_000)
    assert kv_cache_config.num_blocks == 7
    assert {t.size for t in kv_cache_config.tensors.values()} == {7 * 2048}


def test_not_enough_memory_for_one_request_names_the_longest_length_that_fits() -> None:
    specs: dict[str, KVCacheSpec] = {"layers.0": FULL}  # 64 tokens need 4 blocks of 2 KiB
    assert estimate_max_model_len(CONFIG, specs, 4 * 2048 - 1) == 48
    with pytest.raises(InsufficientKVCacheMemoryError) as excinfo:
        get_kv_cache_config(CONFIG, specs, available_memory=4 * 2048 - 1)
    assert str(excinfo.value) == (
        "To serve at least one request with the models's max seq len (64), (0.00 GiB KV cache "
        "is needed, which is larger than the available KV cache memory (0.00 GiB). Based on the "
        "available memory, the estimated maximum model length is 48. Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )
    assert estimate_max_model_len(CONFIG, specs, 2047) == 0
    with pytest.raises(InsufficientKVCacheMemoryError, match=r"\(0\.00 GiB\)\.  Try"):
        get_kv_cache_config(CONFIG, specs, available_memory=2047)
    with pytest.raises(InsufficientKVCacheMemoryError, match="No available memory"):
        get_kv_cache_config(CONFIG, specs, available_memory=0)


def test_different_page_sizes_are_rejected() -> None:
    other = FullAttentionSpec(32, 2, 8, torch.float32, False)
    for config in (CONFIG, HYBRID_MANAGER):
        with pytest.raises(NotImplementedError, match="types"):
            get_kv_cache_config(config, {"a": FULL, "b": other}, available_memory=10_000_000)


@pytest.mark.parametrize("num_blocks", [8, 9, 122, 123])
def test_for_num_blocks_is_the_layout_sizing_would_give(num_blocks: int) -> None:
    specs: dict[str, KVCacheSpec] = {
        f"layers.{i}": FULL if i % 2 == 0 else WINDOW for i in range(4)
    }
    exact = kv_cache_config_for_num_blocks(CONFIG, specs, num_blocks)
    assert exact.num_blocks == num_blocks
    assert exact == get_kv_cache_config(CONFIG, specs, num_blocks * 2048 * 4)


def test_for_num_blocks_still_needs_room_for_one_request() -> None:
    specs: dict[str, KVCacheSpec] = {"layers.0": FULL}
    with pytest.raises(InsufficientKVCacheMemoryError, match="max seq len"):
        kv_cache_config_for_num_blocks(CONFIG, specs, 3)  # 64 tokens need 4 blocks of 16
