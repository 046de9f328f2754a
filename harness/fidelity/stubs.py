"""The explicit stubs the compared vLLM modules import.

vLLM's own small helpers (``cdiv``, ``get_dtype_size``, ``get_layers_from_vllm_config`` ...) run
vLLM's definitions, cut out of whichever file of the tree defines them (``vllm/utils.py`` in 0.9.0,
``vllm/utils/math_utils.py`` and its siblings in 0.34.0). The rest is ours: a silent logger, a
platform that is neither CUDA nor ROCm nor XPU, FlashAttention version 2 (no ahead-of-time
scheduling) with no varlen kernel, no pinned memory, one rank (no tensor, decode-context or
pipeline parallelism), no current config, FlashInfer's TRT-LLM paths off (no SM90/SM100 device),
environment variables at their defaults, and ``flashinfer`` wrappers that record their
arguments. Stubs for modules a tree does not have are never imported.
"""

from __future__ import annotations

import logging
import types
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from harness.errors import HarnessError
from harness.fidelity.sandbox import StubModule, extract_definitions
from harness.fidelity.tree import VllmTree

HELPERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "vllm.utils": (
        ("cdiv", "round_down", "get_dtype_size", "GiB_bytes"),
        ("round_up", "async_tensor_h2d"),
    ),
    "vllm.config": (("get_layers_from_vllm_config",), ()),
}
"""Package -> (helpers every tree defines in it, helpers only some do): vLLM's own code, run."""
CUT_OUT = ("CpuGpuBuffer",)
"""Classes of vLLM 0.34.0 cut out of modules too heavy to load (``vllm/v1/utils.py``), where the
tree defines them under ``vllm.v1``."""


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
            self.is_cuda_graph_enabled = bool(kwargs.get("use_cuda_graph", False))

        def plan(self, *args: Any, **kwargs: Any) -> None:
            recorder.calls.append((kind, "plan", args, kwargs))

    Wrapper.__name__ = Wrapper.__qualname__ = f"Recording{kind.title()}Wrapper"
    return Wrapper


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


class _SilentLogger(logging.Logger):
    """A disabled logger with vLLM's ``*_once`` methods (``vllm/logger.py``), silent too."""

    def __init__(self, name: str) -> None:
        super().__init__(f"harness.fidelity.vllm.{name}")
        self.disabled = True

    def debug_once(self, *args: object, **kwargs: object) -> None:
        del args, kwargs

    info_once = warning_once = error_once = debug_once


def _silent_logger(name: str) -> logging.Logger:
    return _SilentLogger(name)


def _flash_attn_version(*args: object, **kwargs: object) -> int:
    del args, kwargs
    return 2


def _one_rank(*args: object, **kwargs: object) -> tuple[int, int]:
    del args, kwargs
    return 1, 0


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
                    f"{tree.source.root} (vLLM {tree.version}) defines no {name} under "
                    f"{package.replace('.', '/')}; the sandbox runs vLLM's own {name}, so this "
                    "tree cannot be compared"
                )
            if module is not None:
                by_module.setdefault(module, []).append(name)
        for module, names in by_module.items():
            stub = stubs.setdefault(module, StubModule(module, {"torch": torch, "np": np}))
            extract_definitions(tree.path(module), names, stub.__dict__)
            for name in names:
                setattr(stubs[package], name, stub.__dict__[name])
    for name in CUT_OUT:
        module = tree.module_defining(name, under=("vllm.v1",))
        if module is not None:
            stub = stubs.setdefault(module, StubModule(module, {"torch": torch, "np": np}))
            stub.__dict__["PIN_MEMORY"] = False
            extract_definitions(tree.path(module), [name], stub.__dict__)
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
        "vllm.logger": StubModule("vllm.logger", {"init_logger": _silent_logger}),
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
        "vllm.distributed.parallel_state": StubModule(
            "vllm.distributed.parallel_state",
            {
                "get_dcp_world_size_and_rank": _one_rank,
                "get_dcp_group": lambda: SimpleNamespace(world_size=1, rank_in_group=0),
            },
        ),
        "flashinfer": recording_flashinfer(recorder),
    }
    return stubs


def get_seq_lens(
    kv_indptr: torch.Tensor, kv_last_page_len: torch.Tensor, page_size: int
) -> torch.Tensor:
    """FlashInfer's ``get_seq_lens``: the KV length of each request of a paged layout."""
    full_pages = torch.clamp(kv_indptr[1:] - kv_indptr[:-1] - 1, min=0)
    return full_pages * page_size + kv_last_page_len


def recording_flashinfer(recorder: PlanRecorder) -> types.ModuleType:
    """A ``flashinfer`` module whose three wrappers record into ``recorder``; ``get_seq_lens`` is
    FlashInfer's; any other name is a stub that refuses to be used as a value."""
    return StubModule(
        "flashinfer",
        {
            "BatchPrefillWithPagedKVCacheWrapper": _recording_wrapper("prefill", recorder),
            "BatchDecodeWithPagedKVCacheWrapper": _recording_wrapper("decode", recorder),
            "MultiLevelCascadeAttentionWrapper": _recording_wrapper("cascade", recorder),
            "get_seq_lens": get_seq_lens,
        },
    )
