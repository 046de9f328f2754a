"""Modules provided in place of a vLLM tree's own, the same for every caller of the loader.

A silent logger with vLLM's ``*_once`` methods (``vllm/logger.py``); one distributed rank (no
tensor, pipeline, data or decode-context parallelism); and ``flashinfer`` as wrappers that record
their construction and their ``plan`` calls into a :class:`PlanRecorder` (they have no other
method), with FlashInfer's host helper ``get_seq_lens``: no FlashInfer kernel runs here. What a caller decides
itself (the platform, the config, the environment) stays with it
(:mod:`harness.adapter.stubs`, :mod:`harness.fidelity.stubs`).
"""

from __future__ import annotations

import logging
import types
from dataclasses import dataclass, field
from typing import Any

from harness.vllm_tree.stubbing import StubModule

PlanCalls = list[tuple[str, str, tuple[Any, ...], dict[str, Any]]]


class SilentLogger(logging.Logger):
    """vLLM's logger interface (``info_once``, ``warning_once`` ...), silent."""

    def __init__(self, name: str) -> None:
        super().__init__(f"harness.vllm_tree.{name}")
        self.disabled = True

    def _once(self, *args: object, **kwargs: object) -> None:
        del args, kwargs

    info_once = warning_once = debug_once = error_once = _once


def logger_module() -> types.ModuleType:
    """``vllm.logger`` whose ``init_logger`` makes a :class:`SilentLogger`."""
    return StubModule("vllm.logger", {"init_logger": SilentLogger})


class SingleRank:
    """A distributed group of one rank (no tensor, pipeline or context parallelism)."""

    world_size = 1
    rank = 0
    rank_in_group = 0
    local_rank = 0
    device_group = None
    cpu_group = None


def _one_rank(*args: object, **kwargs: object) -> tuple[int, int]:
    del args, kwargs
    return 1, 0


def distributed_modules() -> dict[str, types.ModuleType]:
    """``vllm.distributed`` and its ``parallel_state``: every group is :class:`SingleRank`."""
    group = SingleRank()
    attrs: dict[str, object] = {
        "get_dcp_world_size_and_rank": _one_rank,
        "get_tensor_model_parallel_world_size": lambda: 1,
        "get_tensor_model_parallel_rank": lambda: 0,
        "get_decode_context_model_parallel_world_size": lambda: 1,
        "get_decode_context_model_parallel_rank": lambda: 0,
    }
    for kind in ("tp", "dcp", "pcp", "pp", "dp", "ep", "world"):
        attrs[f"get_{kind}_group"] = lambda: group
    names = ("vllm.distributed", "vllm.distributed.parallel_state")
    return {name: StubModule(name, dict(attrs)) for name in names}


@dataclass
class PlanRecorder:
    """Every FlashInfer wrapper made and planned, in order: ``(wrapper class, "__init__" or
    "plan", args, kwargs)``."""

    calls: PlanCalls = field(default_factory=PlanCalls)


def recording_wrapper(kind: str, recorder: PlanRecorder) -> type[Any]:
    """A FlashInfer wrapper class called ``kind`` that records into ``recorder``."""

    class Wrapper:
        """A FlashInfer wrapper that records its construction and plans (no kernels)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            recorder.calls.append((kind, "__init__", args, kwargs))
            self.is_cuda_graph_enabled = bool(kwargs.get("use_cuda_graph", False))

        def plan(self, *args: Any, **kwargs: Any) -> None:
            recorder.calls.append((kind, "plan", args, kwargs))

    Wrapper.__name__ = Wrapper.__qualname__ = kind
    return Wrapper


FLASHINFER_WRAPPERS = (
    "BatchPrefillWithPagedKVCacheWrapper",
    "BatchDecodeWithPagedKVCacheWrapper",
    "MultiLevelCascadeAttentionWrapper",
    "BatchPrefillWithRaggedKVCacheWrapper",
    "BatchMLAPagedAttentionWrapper",
)


def get_seq_lens(kv_indptr: Any, kv_last_page_len: Any, page_size: int) -> Any:
    """FlashInfer's host helper of that name (``flashinfer/utils.py``): KV lengths from the
    paged layout. Written here from its definition: FlashInfer is never imported."""
    import torch

    full_pages = torch.clamp(kv_indptr[1:] - kv_indptr[:-1] - 1, min=0)
    return full_pages * page_size + kv_last_page_len


def flashinfer_modules(recorder: PlanRecorder) -> dict[str, types.ModuleType]:
    """``flashinfer`` and the submodules builders import wrappers from; any other name is an
    automatic stub."""
    attrs: dict[str, object] = {n: recording_wrapper(n, recorder) for n in FLASHINFER_WRAPPERS}
    attrs["get_seq_lens"] = get_seq_lens
    names = ("flashinfer", "flashinfer.decode", "flashinfer.prefill", "flashinfer.mla")
    return {name: StubModule(name, dict(attrs)) for name in names}
