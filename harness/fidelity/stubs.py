"""The explicit stubs the compared vLLM modules import, and the list of modules loaded for real.

vLLM's own small helpers (``cdiv``, ``get_dtype_size`` ...) run vLLM's definitions, cut out of its
files; the rest is ours (logger, platform, FlashAttention 2, no pinned memory, environment
variables at their defaults, ``flashinfer`` wrappers that record their arguments).
"""

from __future__ import annotations

import logging
import types
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from harness.fidelity.sandbox import StubModule, extract_definitions, module_path

REAL_MODULES = (
    "vllm.v1.kv_cache_interface",
    "vllm.v1.core.kv_cache_utils",
    "vllm.v1.worker.block_table",
    "vllm.v1.worker.gpu_worker",
    "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.attention.backends.utils",
    "vllm.v1.attention.backends.flash_attn",
    "vllm.v1.attention.backends.flashinfer",
    "vllm.v1.attention.backends.mla.common",
)
"""vLLM modules executed from their source text; everything else under ``vllm`` is a stub."""


@dataclass
class PlanRecorder:
    """Every FlashInfer wrapper constructed and planned, in order: ``(kind, event, args, kwargs)``."""

    calls: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]] = field(
        default_factory=list[tuple[str, str, tuple[Any, ...], dict[str, Any]]]
    )


def _recording_wrapper(kind: str, recorder: PlanRecorder) -> type[Any]:
    class Wrapper:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            recorder.calls.append((kind, "init", args, kwargs))

        def plan(self, *args: Any, **kwargs: Any) -> None:
            recorder.calls.append((kind, "plan", args, kwargs))

    Wrapper.__name__ = Wrapper.__qualname__ = f"Recording{kind.title()}Wrapper"
    return Wrapper


_PLATFORM = SimpleNamespace(
    is_cuda=lambda: False, is_rocm=lambda: False, is_pin_memory_available=lambda: False
)
"""``current_platform``: not CUDA, not ROCm; any other question is an error."""


def _strict_module(name: str, attrs: dict[str, Any]) -> types.ModuleType:
    """A module (a package) that has exactly the attributes it was given."""
    module = types.ModuleType(name)
    module.__dict__.update(attrs, __path__=[])
    return module


def _silent_logger(name: str) -> logging.Logger:
    logger = logging.getLogger(f"harness.fidelity.vllm.{name}")
    logger.disabled = True
    return logger


def make_stubs(root: Path, recorder: PlanRecorder) -> dict[str, types.ModuleType]:
    """The explicit stub modules for the source tree ``root``."""
    utils = StubModule("vllm.utils", {"torch": torch, "np": np})
    extract_definitions(
        module_path(root, "vllm.utils"),
        ["cdiv", "round_down", "get_dtype_size", "GiB_bytes"],
        utils.__dict__,
    )
    utils.is_pin_memory_available = lambda: False  # type: ignore[attr-defined]
    config = StubModule("vllm.config")
    extract_definitions(
        module_path(root, "vllm.config"), ["get_layers_from_vllm_config"], config.__dict__
    )

    class Attention:
        """The attention layer class the builders look layers up by."""

    return {
        "vllm.utils": utils,
        "vllm.config": config,
        "vllm.logger": StubModule("vllm.logger", {"init_logger": _silent_logger}),
        "vllm.platforms": StubModule("vllm.platforms", {"current_platform": _PLATFORM}),
        "vllm.envs": _strict_module("vllm.envs", {"VLLM_FLASHINFER_FORCE_TENSOR_CORES": False}),
        "vllm.attention.layer": StubModule("vllm.attention.layer", {"Attention": Attention}),
        "vllm.attention.utils.fa_utils": StubModule(
            "vllm.attention.utils.fa_utils",
            {"get_flash_attn_version": lambda: 2, "flash_attn_supports_fp8": lambda: False},
        ),
        "flashinfer": recording_flashinfer(recorder),
    }


def recording_flashinfer(recorder: PlanRecorder) -> types.ModuleType:
    """A ``flashinfer`` module whose three wrappers record into ``recorder``."""
    return _strict_module(
        "flashinfer",
        {
            "BatchPrefillWithPagedKVCacheWrapper": _recording_wrapper("prefill", recorder),
            "BatchDecodeWithPagedKVCacheWrapper": _recording_wrapper("decode", recorder),
            "MultiLevelCascadeAttentionWrapper": _recording_wrapper("cascade", recorder),
        },
    )
