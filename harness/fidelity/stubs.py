"""The modules the differentials provide in place of the compared vLLM tree's own.

vLLM's own small helpers (``cdiv``, ``get_dtype_size``, ``get_layers_from_vllm_config`` ...) run
vLLM's definitions, cut out of whichever file of the tree defines them (``vllm/utils.py`` in 0.9.0,
``vllm/utils/math_utils.py`` and its siblings in 0.34.0). The rest is ours: a platform that is
neither CUDA nor ROCm nor XPU, FlashAttention version 2 (no ahead-of-time scheduling) with no
varlen kernel, no pinned memory, no current config, FlashInfer's TRT-LLM paths off (no
SM90/SM100 device), environment variables at their defaults, and the silent logger, one rank
and recording ``flashinfer`` of :mod:`harness.vllm_tree.provided`. Stubs for modules a tree does
not have are never imported.
"""

from __future__ import annotations

import types
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from harness.errors import HarnessError
from harness.vllm_tree.extract import extract_definitions
from harness.vllm_tree.provided import (
    PlanRecorder,
    distributed_modules,
    flashinfer_modules,
    logger_module,
)
from harness.vllm_tree.stubbing import StubModule
from harness.vllm_tree.tree import VllmTree

HELPERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "vllm.utils": (
        ("cdiv", "round_down", "get_dtype_size", "GiB_bytes"),
        ("round_up", "async_tensor_h2d"),
    ),
    "vllm.config": (
        ("get_layers_from_vllm_config",),
        ("CUDAGraphMode", "get_kv_cache_dtype_handler", "_KV_CACHE_DTYPE_HANDLERS"),
    ),
    # vLLM 0.9.0's FlashInfer impl compares its attn_type with AttentionType.DECODER; its MLA
    # builder reads get_mla_dims (later trees define both in modules the differentials load).
    "vllm.attention": ((), ("AttentionType", "MLADims", "get_mla_dims")),
}
"""Package -> (helpers every tree defines in it, helpers only some do): vLLM's own code, run."""
CUT_OUT = ("CpuGpuBuffer",)
"""Classes of vLLM 0.34.0 cut out of modules too heavy to load (``vllm/v1/utils.py``), where the
tree defines them under ``vllm.v1``."""


def _false(*args: object, **kwargs: object) -> bool:
    del args, kwargs
    return False


def _nothing(*args: object, **kwargs: object) -> None:
    del args, kwargs


_PLATFORM = SimpleNamespace(
    is_cuda=_false,
    is_rocm=_false,
    is_xpu=_false,
    is_cuda_alike=_false,
    is_pin_memory_available=_false,
    is_device_capability=_false,
    is_device_capability_family=_false,
    has_device_capability=_false,
    get_device_capability=_nothing,
    fp8_dtype=lambda: torch.float8_e4m3fn,  # vLLM's Platform defaults
    dispatch_key="CPU",
)
"""``current_platform``: not CUDA, not ROCm, not XPU, no device capability (no SM90/SM100
kernel paths); any other question is an error."""


def _strict_module(name: str, attrs: dict[str, Any]) -> types.ModuleType:
    """A module (a package) that has exactly the attributes it was given."""
    module = types.ModuleType(name)
    module.__dict__.update(attrs, __path__=[])
    return module


def _flash_attn_version(*args: object, **kwargs: object) -> int:
    del args, kwargs
    return 2


def _helper_modules(tree: VllmTree) -> dict[str, StubModule]:
    """A stub per module that defines one of :data:`HELPERS`, holding vLLM's definitions; each
    package's stub re-exports its helpers (``from vllm.config import get_layers_from_vllm_config``
    works where the package only re-exports it)."""
    stubs: dict[str, StubModule] = {}
    for package, (required, optional) in HELPERS.items():
        stubs.setdefault(package, StubModule(package, {"torch": torch, "np": np}))
        by_module: dict[str, list[str]] = {}
        for name in (*required, *optional):
            module = tree.module_defining(name, under=(package,))
            if module is None and name in required:
                raise HarnessError(
                    f"{tree.label} defines no {name} under "
                    f"{package.replace('.', '/')}; the sandbox runs vLLM's own {name}, so this "
                    "tree cannot be compared"
                )
            if module is not None:
                by_module.setdefault(module, []).append(name)
        for module, names in by_module.items():
            stub = stubs.setdefault(module, StubModule(module, {"torch": torch, "np": np}))
            extract_definitions(tree.module_file(module), names, stub.__dict__)
            for name in names:
                setattr(stubs[package], name, stub.__dict__[name])
    for name in CUT_OUT:
        module = tree.module_defining(name, under=("vllm.v1",))
        if module is not None:
            stub = stubs.setdefault(module, StubModule(module, {"torch": torch, "np": np}))
            stub.__dict__["PIN_MEMORY"] = False
            extract_definitions(tree.module_file(module), [name], stub.__dict__)
    for module in tree.modules_defining("PIN_MEMORY", under="vllm.utils"):
        stubs.setdefault(module, StubModule(module, {"torch": torch})).__dict__["PIN_MEMORY"] = (
            False
        )
    for module in ("vllm.utils", *tree.modules_defining("is_pin_memory_available", "vllm.utils")):
        stubs.setdefault(module, StubModule(module)).__dict__["is_pin_memory_available"] = _false
    return stubs


def make_stubs(tree: VllmTree, recorder: PlanRecorder) -> dict[str, types.ModuleType]:
    """The explicit stub modules for the source tree ``tree``."""

    class Attention:
        """The attention layer class the builders look layers up by."""

    flash_attn_utils = {
        "get_flash_attn_version": _flash_attn_version,
        "flash_attn_supports_fp8": _false,
        "is_flash_attn_varlen_func_available": _false,
        "uses_fa4_hd256_kernel": _false,
    }
    helpers = _helper_modules(tree)
    helpers["vllm.config"].__dict__["get_current_vllm_config_or_none"] = lambda: None
    stubs: dict[str, types.ModuleType] = {
        **helpers,
        "vllm.logger": logger_module(),
        "vllm.platforms": StubModule("vllm.platforms", {"current_platform": _PLATFORM}),
        "vllm.envs": _strict_module(
            "vllm.envs",
            {
                "VLLM_FLASHINFER_FORCE_TENSOR_CORES": False,
                "VLLM_BATCH_INVARIANT": False,
                "VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE": 394 * 1024 * 1024,
            },
        ),
        # vLLM 0.9.0 and 0.34.0 keep the layer class and the FlashAttention helpers here:
        "vllm.attention.layer": StubModule("vllm.attention.layer", {"Attention": Attention}),
        "vllm.model_executor.layers.attention": StubModule(
            "vllm.model_executor.layers.attention", {"Attention": Attention}
        ),
        "vllm.model_executor.layers.attention_layer_base": StubModule(
            "vllm.model_executor.layers.attention_layer_base", {"AttentionLayerBase": Attention}
        ),
        "vllm.utils.flashinfer": StubModule(
            "vllm.utils.flashinfer",
            {
                "can_use_trtllm_attention": _false,
                "use_trtllm_attention": _false,
                "supports_trtllm_attention": _false,
                "force_use_trtllm_attention": _nothing,
                "pin_host_range_buf": _nothing,
            },
        ),
        "vllm.attention.utils.fa_utils": StubModule(
            "vllm.attention.utils.fa_utils", flash_attn_utils
        ),
        "vllm.v1.attention.backends.fa_utils": StubModule(
            "vllm.v1.attention.backends.fa_utils", flash_attn_utils
        ),
        **distributed_modules(),
        **flashinfer_modules(recorder),
    }
    return stubs
