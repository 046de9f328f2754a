"""Engine configuration and the "current config" context (vLLM's ``set_current_vllm_config``).

Builders receive their ``VllmConfig`` explicitly. ``get_current_vllm_config()`` exists so that code
which reads the global config outside its context is expressible (and detectable): outside the
context it warns with :class:`ConfigReadOutsideContextWarning` and returns a default config, as vLLM
does.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import torch

from harness.errors import HarnessError

T = TypeVar("T")


@dataclass(slots=True, frozen=True)
class ModelConfig:
    """Shape of a Llama-style decoder; enough to size weights, activations and the KV cache."""

    name: str = "tiny"
    hidden_size: int = 32
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 64
    intermediate_size: int = 64
    vocab_size: int = 128
    dtype: torch.dtype = torch.float32
    max_model_len: int = 256
    sliding_window: int | None = None
    layer_types: tuple[str, ...] = ()
    """Per layer ``"full_attention"`` or ``"sliding_attention"`` (HF style); empty means all full."""
    rms_norm_eps: float = 1e-5
    rope_theta: float = 500000.0

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.layer_types and len(self.layer_types) != self.num_hidden_layers:
            raise ValueError("layer_types must name every layer")
        unknown = set(self.layer_types) - {"full_attention", "sliding_attention"}
        if unknown:
            raise ValueError(f"unknown layer types: {sorted(unknown)}")
        if "sliding_attention" in self.layer_types and self.sliding_window is None:
            raise ValueError("sliding_attention layers need a sliding_window")

    def layer_type(self, layer_idx: int) -> str:
        """``"full_attention"`` or ``"sliding_attention"`` for layer ``layer_idx``."""
        return self.layer_types[layer_idx] if self.layer_types else "full_attention"

    def layer_sliding_window(self, layer_idx: int) -> int | None:
        """The sliding window of layer ``layer_idx`` in tokens, None for full attention."""
        return self.sliding_window if self.layer_type(layer_idx) == "sliding_attention" else None


@dataclass(slots=True, frozen=True)
class CacheConfig:
    """KV cache settings (vLLM's ``CacheConfig``)."""

    block_size: int = 16
    gpu_memory_utilization: float = 0.9
    num_gpu_blocks_override: int | None = None
    """When set, ``get_kv_cache_config`` uses this many blocks instead of the profiled number."""

    def __post_init__(self) -> None:
        if self.block_size <= 0:
            raise ValueError("block_size must be positive")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ValueError("gpu_memory_utilization must be in (0, 1]")
        if self.num_gpu_blocks_override is not None and self.num_gpu_blocks_override < 0:
            raise ValueError("num_gpu_blocks_override must not be negative")


@dataclass(slots=True, frozen=True)
class SchedulerConfig:
    """Batch limits (vLLM's ``SchedulerConfig``)."""

    max_num_seqs: int = 8
    max_num_batched_tokens: int = 256
    max_model_len: int = 256
    disable_hybrid_kv_cache_manager: bool = True
    """True (vLLM 0.9.0's only behaviour): a model with full and sliding-window layers gets ONE KV
    cache group, its sliding layers turned into ``FullAttentionSpec(sliding_window=...)``
    (``unify_hybrid_kv_cache_specs``). False: one group per attention type, as the hybrid KV cache
    manager of vLLM 0.9.1 and later (which added this switch, defaulting to False)."""

    def __post_init__(self) -> None:
        if min(self.max_num_seqs, self.max_num_batched_tokens, self.max_model_len) <= 0:
            raise ValueError("scheduler limits must be positive")


def llm_class_scheduler_config(*, large_gpu: bool, max_model_len: int) -> SchedulerConfig:
    """vLLM 0.9.0 ``EngineArgs._set_default_args_v1`` for ``UsageContext.LLM_CLASS`` (what
    lm-eval's ``vllm`` model creates): 1024 sequences and 16384 tokens on a GPU with at least
    70 GiB that is not an A100 (``large_gpu``), else 256 and 8192."""
    seqs, tokens = (1024, 16384) if large_gpu else (256, 8192)
    return SchedulerConfig(seqs, tokens, max_model_len)


@dataclass(slots=True, frozen=True)
class VllmConfig:
    """The whole engine configuration, passed explicitly to every builder."""

    model_config: ModelConfig = field(default_factory=ModelConfig)
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    scheduler_config: SchedulerConfig = field(default_factory=SchedulerConfig)


class ConfigReadOutsideContextWarning(UserWarning):
    """``get_current_vllm_config()`` was called with no config set: a default config was returned."""


_current_vllm_config: VllmConfig | None = None


@contextlib.contextmanager
def set_current_vllm_config(vllm_config: VllmConfig) -> Generator[VllmConfig, None, None]:
    """Make ``vllm_config`` the current config for the duration of the ``with`` block."""
    global _current_vllm_config
    previous = _current_vllm_config
    _current_vllm_config = vllm_config
    try:
        yield vllm_config
    finally:
        _current_vllm_config = previous


def get_current_vllm_config() -> VllmConfig:
    """The current config; outside ``set_current_vllm_config`` a default one, with a warning."""
    if _current_vllm_config is None:
        warnings.warn(
            "get_current_vllm_config() called outside set_current_vllm_config(): "
            "returning a default VllmConfig",
            ConfigReadOutsideContextWarning,
            stacklevel=2,
        )
        return VllmConfig()
    return _current_vllm_config


MODEL_PRESETS: dict[str, ModelConfig] = {
    "tiny": ModelConfig(),
    "tiny-hybrid": ModelConfig(
        name="tiny-hybrid",
        num_hidden_layers=4,
        sliding_window=8,
        layer_types=("full_attention", "sliding_attention") * 2,
    ),
    "llama-3.1-8b": ModelConfig(
        name="llama-3.1-8b",
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=14336,
        vocab_size=128256,
        dtype=torch.bfloat16,
        max_model_len=131072,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
    ),
}
"""Named model shapes: a few thousand parameters up to Llama-3.1-8B."""


def lookup(registry: Mapping[str, T], name: str, kind: str) -> T:
    """``registry[name]``; an unknown name is an error that lists the available ones."""
    try:
        return registry[name]
    except KeyError:
        raise HarnessError(
            f"unknown {kind} {name!r}; available: {', '.join(sorted(registry))}"
        ) from None


def get_model_config(name: str) -> ModelConfig:
    """The preset called ``name``; an unknown name lists the available ones."""
    return lookup(MODEL_PRESETS, name, "model")
