"""KV cache specs: page sizes, type ids and memory bounds as vLLM 0.9.0 computes them."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from harness.reference.config import ModelConfig, SchedulerConfig, VllmConfig
from harness.reference.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheSpec,
    SlidingWindowSpec,
)


def test_llama_8b_page_size_is_64_kib_per_layer_block_of_16() -> None:
    spec = FullAttentionSpec(16, num_kv_heads=8, head_size=128, dtype=torch.bfloat16, use_mla=False)
    assert spec.page_size_bytes == 2 * 16 * 8 * 128 * 2 == 64 * 1024
    assert spec.type_id == "full_attention_16_65536"


def test_mla_stores_one_latent() -> None:
    spec = FullAttentionSpec(64, num_kv_heads=1, head_size=576, dtype=torch.bfloat16, use_mla=True)
    assert spec.page_size_bytes == 64 * 576 * 2


def test_max_memory_usage() -> None:
    config = VllmConfig(
        model_config=ModelConfig(max_model_len=100),
        scheduler_config=SchedulerConfig(max_num_batched_tokens=20, max_model_len=100),
    )
    full = FullAttentionSpec(16, 2, 8, torch.float32, False)
    assert full.max_memory_usage_bytes(config) == 7 * full.page_size_bytes
    window = SlidingWindowSpec(16, 2, 8, torch.float32, False, sliding_window=8)
    # min(8 - 1 + 20, 100) = 27 tokens -> 2 blocks, + 1 for an unaligned window start.
    assert window.max_memory_usage_bytes(config) == 3 * window.page_size_bytes
    assert window.type_id != full.type_id


def test_merge_requires_one_type() -> None:
    full = FullAttentionSpec(16, 2, 8, torch.float32, False)
    window = SlidingWindowSpec(16, 2, 8, torch.float32, False, sliding_window=8)
    assert KVCacheSpec.merge([full, full]) == full
    with pytest.raises(AssertionError, match="must share the same type_id"):
        KVCacheSpec.merge([full, window])


def test_full_attention_merge_keeps_the_one_window() -> None:
    """vLLM 0.9.0: ``Full(None) + Full(4)`` has window 4; two different windows are an error."""
    full = FullAttentionSpec(16, 2, 8, torch.float32, False)
    four = dataclasses.replace(full, sliding_window=4)
    assert FullAttentionSpec.merge([full, four]).sliding_window == 4
    assert FullAttentionSpec.merge([four, full, four]).sliding_window == 4
    assert FullAttentionSpec.merge([full, full]).sliding_window is None
    with pytest.raises(ValueError, match="must have the same window size"):
        FullAttentionSpec.merge([four, dataclasses.replace(full, sliding_window=8)])
    assert full.sliding_window is None  # the inputs are not modified


def test_sliding_window_rejects_mla() -> None:
    with pytest.raises(AssertionError, match="MLA is not supported for sliding window"):
        SlidingWindowSpec(16, 1, 576, torch.bfloat16, True, sliding_window=8)
