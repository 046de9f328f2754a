"""Config presets and the current-config context."""

from __future__ import annotations

import warnings

import pytest

from harness.errors import HarnessError
from harness.reference.config import (
    ConfigReadOutsideContextWarning,
    VllmConfig,
    get_current_vllm_config,
    get_model_config,
    set_current_vllm_config,
)


def test_presets() -> None:
    llama = get_model_config("llama-3.1-8b")
    assert (llama.num_hidden_layers, llama.hidden_size, llama.num_key_value_heads) == (32, 4096, 8)
    hybrid = get_model_config("tiny-hybrid")
    assert {hybrid.layer_type(i) for i in range(4)} == {"full_attention", "sliding_attention"}
    with pytest.raises(HarnessError, match=r"available: llama-3\.1-8b, tiny, tiny-hybrid"):
        get_model_config("nope")


def test_context_sets_and_restores() -> None:
    config = VllmConfig()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with set_current_vllm_config(config):
            assert get_current_vllm_config() is config
    with pytest.warns(ConfigReadOutsideContextWarning):
        outside = get_current_vllm_config()
    assert outside is not config


def test_invariants_are_checked() -> None:
    from harness.reference.config import CacheConfig, ModelConfig

    with pytest.raises(ValueError):
        ModelConfig(num_attention_heads=3, num_key_value_heads=2)
    with pytest.raises(ValueError):
        ModelConfig(layer_types=("sliding_attention", "full_attention"))
    with pytest.raises(ValueError):
        CacheConfig(gpu_memory_utilization=1.5)
