"""get_kv_cache_config: grouping by type_id and vLLM's num_blocks arithmetic; an exact size."""

from __future__ import annotations

import pytest
import torch

from harness.reference.config import ModelConfig, VllmConfig
from harness.reference.kv_cache_interface import FullAttentionSpec, KVCacheSpec, SlidingWindowSpec
from harness.reference.kv_cache_utils import (
    InsufficientKVCacheMemoryError,
    get_kv_cache_config,
    kv_cache_config_for_num_blocks,
)

CONFIG = VllmConfig(model_config=ModelConfig(max_model_len=64))
FULL = FullAttentionSpec(16, 2, 8, torch.float32, False)  # 2 KiB pages
WINDOW = SlidingWindowSpec(16, 2, 8, torch.float32, False, sliding_window=8)


def test_uniform_model_has_one_group() -> None:
    specs: dict[str, KVCacheSpec] = {f"layers.{i}": FULL for i in range(4)}
    config = get_kv_cache_config(CONFIG, specs, available_memory=1_000_000)
    assert config.num_blocks == 1_000_000 // 2048 // 4 == 122
    assert len(config.kv_cache_groups) == 1
    assert config.kv_cache_groups[0].layer_names == list(specs)
    assert {t.size for t in config.tensors.values()} == {122 * 2048}


def test_hybrid_model_has_two_groups() -> None:
    specs: dict[str, KVCacheSpec] = {
        f"layers.{i}": FULL if i % 2 == 0 else WINDOW for i in range(4)
    }
    config = get_kv_cache_config(CONFIG, specs, available_memory=1_000_000)
    assert [g.layer_names for g in config.kv_cache_groups] == [
        ["layers.0", "layers.2"],
        ["layers.1", "layers.3"],
    ]
    assert isinstance(config.kv_cache_groups[1].kv_cache_spec, SlidingWindowSpec)
    assert sum(t.size for t in config.tensors.values()) <= 1_000_000


def test_not_enough_memory_for_one_request() -> None:
    specs: dict[str, KVCacheSpec] = {"layers.0": FULL}
    with pytest.raises(InsufficientKVCacheMemoryError, match="max seq len"):
        get_kv_cache_config(CONFIG, specs, available_memory=4 * 2048 - 1)
    with pytest.raises(InsufficientKVCacheMemoryError, match="No available memory"):
        get_kv_cache_config(CONFIG, specs, available_memory=0)


def test_different_page_sizes_are_rejected() -> None:
    other = FullAttentionSpec(32, 2, 8, torch.float32, False)
    with pytest.raises(NotImplementedError, match="page sizes"):
        get_kv_cache_config(CONFIG, {"a": FULL, "b": other}, available_memory=10_000_000)


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
