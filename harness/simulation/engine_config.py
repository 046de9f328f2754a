"""The engine configuration a workload runs under (vLLM's ``EngineArgs`` -> ``VllmConfig``, reduced).

One builder for every tool that drives the reference engine over a workload, the simulation and
the scaling detector: the model preset (optionally at another dtype), its ``max_model_len`` capped
by the workload's, the workload's scheduler limits, and vLLM's ``gpu_memory_utilization``.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from harness.reference.config import (
    CacheConfig,
    ModelConfig,
    VllmConfig,
    get_model_config,
)
from harness.simulation.workload import Workload

DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's ``CacheConfig.gpu_memory_utilization`` default (lm-eval's ``vllm`` model passes 0.9 too)."""


def engine_config(
    model: str | ModelConfig,
    workload: Workload,
    *,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    dtype: torch.dtype | None = None,
) -> VllmConfig:
    """The ``VllmConfig`` that runs ``workload`` on ``model`` (a preset name or a config).

    ``dtype`` replaces the preset's dtype (weights, activations and the KV cache).
    """
    model_config = get_model_config(model) if isinstance(model, str) else model
    max_model_len = min(workload.limits.max_model_len, model_config.max_model_len)
    model_config = replace(
        model_config, max_model_len=max_model_len, dtype=dtype or model_config.dtype
    )
    return VllmConfig(
        model_config=model_config,
        cache_config=CacheConfig(gpu_memory_utilization=gpu_memory_utilization),
        scheduler_config=replace(workload.limits, max_model_len=max_model_len),
    )
