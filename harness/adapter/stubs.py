"""How the adapter splits a vLLM tree: what runs from its source, what the adapter provides.

The attention path runs from the tree's files (:data:`REAL_PREFIXES`). Provided in its place,
each answered for one process on one GPU with no parallelism: the logger, the distributed groups
and FlashInfer (:mod:`harness.vllm_tree.provided`), the platform (:mod:`harness.adapter.platform`),
the config package (the tree's ``CUDAGraphMode`` and the layers the driver registers; config
objects come from :mod:`harness.adapter.config`), FlashAttention's version query, and Triton (the
real package under its CPU interpreter, ``TRITON_INTERPRET=1``, when installed). Everything else
under ``vllm`` is an automatic stub.
"""

from __future__ import annotations

import contextlib
import os
import types
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.adapter.platform import PlatformOptions
from harness.vllm_tree.extract import extract_definitions
from harness.vllm_tree.provided import (
    PlanRecorder,
    distributed_modules,
    flashinfer_modules,
    logger_module,
)
from harness.vllm_tree.stubbing import StubModule
from harness.vllm_tree.tree import VllmTree

TRITON_EXTRA_HINT = "pip install 'attn-metadata-harness[triton]'"
REAL_PREFIXES = (
    "vllm.envs",
    "vllm.utils",
    "vllm.platforms.interface",
    "vllm.attention",
    "vllm.v1.attention",
    "vllm.v1.kv_cache_interface",
    "vllm.v1.kv_cache_layout",
    "vllm.v1.kv_cache_spec_registry",
    "vllm.v1.utils",
    "vllm.v1.worker.block_table",
    "vllm.v1.worker.cp_utils",
    "vllm.v1.worker.workspace",
    "vllm.v1.worker.ubatching",
    "vllm.model_executor.layers.attention",
    "vllm.model_executor.layers.attention_layer_base",
    "vllm.model_executor.layers.quantization.utils.quant_utils",
    "vllm.scalar_type",
    "vllm.config.cache",
)
"""Modules (and packages, with everything under them) executed from the tree's source."""


def is_real(name: str) -> bool:
    """Whether module ``name`` runs from the tree's source (see :data:`REAL_PREFIXES`)."""
    return any(name == p or name.startswith(p + ".") for p in REAL_PREFIXES)


@dataclass
class Registry:
    """What the driver hands the tree at run time: the config and the model's attention layers."""

    vllm_config: Any = None
    layers: dict[str, Any] = field(default_factory=dict[str, Any])


REGISTRY = Registry()


def _layers(vllm_config: Any, layer_type: object = None, layer_names: Iterable[str] | None = None):  # type: ignore[no-untyped-def]
    """``get_layers_from_vllm_config``: the registered attention layers (every layer of the
    adapter's model is an attention layer, whatever ``layer_type`` asks for)."""
    del vllm_config, layer_type
    names = list(REGISTRY.layers) if layer_names is None else list(layer_names)
    return {name: REGISTRY.layers[name] for name in names if name in REGISTRY.layers}


@contextlib.contextmanager
def _set_current_vllm_config(vllm_config: Any, *args: object, **kwargs: object) -> Generator[None]:
    del args, kwargs
    saved = REGISTRY.vllm_config
    REGISTRY.vllm_config = vllm_config
    try:
        yield
    finally:
        REGISTRY.vllm_config = saved


def _config_modules(tree: VllmTree) -> dict[str, types.ModuleType]:
    """``vllm.config`` and its submodules: stubs, plus the tree's ``CUDAGraphMode``."""
    common: dict[str, object] = {
        "get_layers_from_vllm_config": _layers,
        "get_current_vllm_config": lambda: REGISTRY.vllm_config,
        "get_current_vllm_config_or_none": lambda: REGISTRY.vllm_config,
        "set_current_vllm_config": _set_current_vllm_config,
    }
    config = StubModule("vllm.config", common)
    modules: dict[str, types.ModuleType] = {"vllm.config": config}
    for path in tree.config_files():
        name = f"vllm.config.{path.stem}"
        if path.name == "__init__.py" or is_real(name):
            continue
        modules[name] = StubModule(name, dict(common))
    # The cudagraph mode enum, where the tree has one (0.10 on), from its own source.
    for path in tree.config_files():
        namespace: dict[str, Any] = {"__name__": "vllm.config"}
        if not extract_definitions(path, ["CUDAGraphMode"], namespace, required=False):
            for module in modules.values():
                module.CUDAGraphMode = namespace["CUDAGraphMode"]  # type: ignore[attr-defined]
            break
    return modules


def _flash_attn_modules(options: PlatformOptions) -> dict[str, types.ModuleType]:
    def supported(fa_version: int, device: object = None) -> bool:
        del device
        return fa_version == options.flash_attn_version

    def reason(fa_version: int, device: object = None) -> str | None:
        del device
        if supported(fa_version):
            return None
        return f"the adapter's platform has FlashAttention {options.flash_attn_version} only"

    attrs: dict[str, object] = {
        "is_fa_version_supported": supported,
        "fa_version_unsupported_reason": reason,
    }
    return {
        "vllm.vllm_flash_attn": StubModule("vllm.vllm_flash_attn", dict(attrs)),
        "vllm.vllm_flash_attn.flash_attn_interface": StubModule(
            "vllm.vllm_flash_attn.flash_attn_interface", dict(attrs)
        ),
    }


def triton_available() -> bool:
    """Whether the ``triton`` package is importable (the ``triton`` extra)."""
    import importlib.util

    return importlib.util.find_spec("triton") is not None


class TritonMissing(RuntimeError):
    """A Triton kernel was launched but the ``triton`` package is not installed."""


def _missing_triton_jit(fn: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    def wrap(function: Callable[..., Any]) -> Any:
        class Kernel:
            """A Triton kernel that cannot run here (no ``triton`` package)."""

            def __getitem__(self, grid: object) -> Callable[..., Any]:
                def launch(*args: object, **kwargs: object) -> None:
                    raise TritonMissing(
                        f"build launched the Triton kernel {function.__name__}; install the "
                        f"triton extra to run it under Triton's CPU interpreter: "
                        f"{TRITON_EXTRA_HINT}"
                    )

                return launch

        return Kernel()

    return wrap(fn) if fn is not None else wrap


def _triton_modules() -> dict[str, types.ModuleType]:
    """``vllm.triton_utils``: the real Triton under its CPU interpreter, or a stand-in whose
    kernels refuse to launch (naming the extra to install)."""
    if triton_available():
        os.environ["TRITON_INTERPRET"] = "1"
        import triton
        import triton.language as tl

        attrs: dict[str, object] = {"HAS_TRITON": True, "triton": triton, "tl": tl}
    else:
        triton_stub = StubModule("triton", {"jit": _missing_triton_jit})
        attrs = {"HAS_TRITON": False, "triton": triton_stub, "tl": StubModule("triton.language")}
    return {"vllm.triton_utils": StubModule("vllm.triton_utils", attrs)}


def provided_modules(
    tree: VllmTree, options: PlatformOptions, recorder: PlanRecorder
) -> dict[str, types.ModuleType]:
    """Every module the adapter provides for ``tree`` (``vllm.platforms`` gets its
    ``current_platform`` once the tree's ``interface`` module is loaded)."""
    modules: dict[str, types.ModuleType] = {
        "vllm.logger": logger_module(),
        "vllm.platforms": StubModule("vllm.platforms"),
    }
    modules.update(_config_modules(tree))
    modules.update(distributed_modules())
    modules.update(_flash_attn_modules(options))
    modules.update(flashinfer_modules(recorder))
    modules.update(_triton_modules())
    return modules


def _no_custom_op(*args: object, **kwargs: object) -> None:
    del args, kwargs


def _python_function(op_name: str, op_func: Any, target_lib: object = None) -> Any:
    del op_name, target_lib
    return op_func


def patches(options: PlatformOptions) -> dict[str, dict[str, object]]:
    """Functions replaced right after their real module ran: each would touch the network,
    the file system or a CUDA toolkit to answer a platform question ``options`` answers."""
    trtllm = options.flashinfer_trtllm
    return {
        # Registering torch custom ops (kernels) is left out: calls go to the Python function.
        "vllm.utils.torch_utils": {
            "direct_register_custom_op": _no_custom_op,
            "eager_bypass_custom_op": _python_function,
        },
        "vllm.utils.flashinfer": {
            "has_flashinfer": lambda: True,
            "has_flashinfer_cubin": lambda: trtllm,
            "has_nvidia_artifactory": lambda: trtllm,
        },
    }
