"""FlashInfer: decode-first reordering, the metadata, and every wrapper's constructor and plan.

vLLM 0.9.0's builder is compared plan argument by plan argument; vLLM 0.34.0's plans by keyword
(and the decode through ``fast_plan_decode``), so what each plan fixes is compared by name. Its
page indices come from a Triton kernel, run here as an exact Python emulation.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from harness.fidelity.differential import Differential, modules_defining
from harness.fidelity.differentials.batch import (
    BUILDER_CODE,
    BUILDER_HELPERS,
    BatchCase,
    fields_beyond,
    generate_batch,
    metadata_fields,
    reference_common,
    returns,
    runner_order,
    show_batch,
    shrink_batch,
    spec_era_block_table,
    spec_era_common,
    spec_era_config,
    vllm_build,
)
from harness.fidelity.differentials.builder_deviations import (
    FLASHINFER_CASCADE_REMOVED,
    FLASHINFER_HEAD_SIZE_CHECK_MOVED,
    FLASHINFER_METADATA_FIELDS,
    FLASHINFER_PLAN_ARGUMENTS,
    FLASHINFER_WINDOW_CHECK,
    REORDER_BY_RUNNER,
    SLOT_MAPPING_BY_RUNNER,
)
from harness.fidelity.differentials.builders import (
    group_spec,
    reordered_reference,
    reordered_vllm,
    slot_buffer,
)
from harness.fidelity.vllm import VllmCode
from harness.reference.backends import flashinfer as ref_flashinfer
from harness.vllm_tree.era import Era
from harness.vllm_tree.provided import PlanCalls, PlanRecorder, flashinfer_modules


def generate_flashinfer(rng: np.random.Generator) -> BatchCase:
    """Any block size; head sizes FlashInfer accepts and one it rejects; sometimes mixed windows."""
    case = generate_batch(rng, block_sizes=(1, 16, 32), head_sizes=(64, 128, 256, 64, 32))
    roll = rng.random()
    if roll < 0.15:
        case = replace(case, layer_windows=(None, 40))  # window_left differs: vLLM asserts
    elif roll < 0.3:
        case = replace(case, layer_windows=(40, 40))
    return case


_KINDS = {
    "BatchPrefillWithPagedKVCacheWrapper": "prefill",
    "BatchDecodeWithPagedKVCacheWrapper": "decode",
    "MultiLevelCascadeAttentionWrapper": "cascade",
}
"""FlashInfer's wrapper classes by the reference's names (``PlanCall.wrapper``)."""


def _plan_view(calls: PlanCalls) -> list[object]:
    """Each ``plan`` with the constructor arguments of its wrapper (workspace buffer left out)."""
    inits: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
    planned: list[object] = []
    for wrapper, event, args, kwargs in calls:
        kind = _KINDS.get(wrapper, wrapper)
        if event == "__init__":
            workspace_at = 1 if kind == "cascade" else 0
            inits[kind] = (args[:workspace_at] + args[workspace_at + 1 :], kwargs)
        else:
            planned.append(ref_flashinfer.PlanCall(kind, *inits[kind], args, kwargs))
    return planned


@contextmanager
def _plans_recorded() -> Generator[PlanRecorder, None, None]:
    """Let the reference builder plan on CPU, into a recording ``flashinfer`` module."""
    recorder = PlanRecorder()
    saved_available = ref_flashinfer.flashinfer_available
    saved_module = sys.modules.get("flashinfer")
    ref_flashinfer.flashinfer_available = lambda device: True
    sys.modules["flashinfer"] = flashinfer_modules(recorder)["flashinfer"]
    try:
        yield recorder
    finally:
        ref_flashinfer.flashinfer_available = saved_available
        if saved_module is None:
            del sys.modules["flashinfer"]
        else:
            sys.modules["flashinfer"] = saved_module


_WRAPPERS = ("prefill_wrapper", "decode_wrapper", "cascade_wrapper")


_PLANNED = (
    "num_qo_heads",
    "num_kv_heads",
    "head_dim",
    "page_size",
    "causal",
    "sm_scale",
    "window_left",
    "logits_soft_cap",
    "q_data_type",
    "kv_data_type",
)
"""What a plan fixes besides the page tables, by vLLM 0.9.0's keyword names."""
_PAGES = ("qo_indptr", "paged_kv_indptr", "paged_kv_indices", "paged_kv_last_page_len")
_RENAMED = {
    "head_dim_qk": "head_dim",  # vLLM 0.34.0's prefill plan
    "indptr": "paged_kv_indptr",  # the decode wrapper's own names
    "indices": "paged_kv_indices",
    "last_page_len": "paged_kv_last_page_len",
}


def _planned(calls: PlanCalls) -> list[dict[str, Any]]:
    """What each ``plan`` fixes, whatever the argument layout: the page tables, the heads, the
    scale, the window, the soft cap and the dtypes, by name (positional arguments in vLLM 0.9.0's
    order; vLLM 0.34.0's keywords with its renames followed)."""
    planned: list[dict[str, Any]] = []
    for wrapper, event, args, kwargs in calls:
        kind = _KINDS.get(wrapper, wrapper)
        if event != "plan":
            continue
        pages = _PAGES if kind == "prefill" else _PAGES[1:]
        named = {**dict(zip((*pages, *_PLANNED[:4]), args, strict=False))}
        named.update({_RENAMED.get(k, k): v for k, v in kwargs.items()})
        wanted = (*pages, *_PLANNED)
        planned.append({"wrapper": kind, **{k: named[k] for k in wanted if k in named}})
    return planned


def flashinfer_vllm(vllm: VllmCode, case: BatchCase) -> object:
    if vllm.era is Era.SPEC:
        return _flashinfer_spec_era(vllm, case)
    module = vllm.module_defining("FlashInferMetadataBuilder")
    attention_cls = vllm.module("attention.layer").Attention
    layers: dict[str, Any] = {}
    heads = (case.num_heads, case.head_size, case.head_size**-0.5, case.num_kv_heads)
    for i, window in enumerate(case.layer_windows):
        layer = attention_cls()
        # alibi_slopes, sliding_window, kv_cache_dtype
        layer.impl = module.FlashInferImpl(*heads, None, window, "auto")
        layers[f"model.layers.{i}.self_attn.attn"] = layer
    builder_cls = module.FlashInferMetadataBuilder
    builder, ordered, reordering, common = reordered_vllm(vllm, builder_cls, case, False, layers)
    vllm.recorder.calls.clear()
    try:
        metadata: object = metadata_fields(
            vllm_build(builder, common, ordered, ordered.common_prefix_len), skip=_WRAPPERS
        )
    except (ValueError, AssertionError) as exc:
        metadata = exc
    return {
        "reorder": reordering,
        "metadata": metadata,
        "plans": _plan_view(vllm.recorder.calls),
        "planned": _planned(vllm.recorder.calls),
        "slot_mapping_buffer": slot_buffer(builder.block_table),
    }


def copy_page_indices(grid: tuple[int]) -> Callable[..., None]:
    """An exact emulation of vLLM 0.34.0's Triton ``_copy_page_indices_kernel``
    (``vllm/v1/attention/backends/flashinfer.py``), launched as ``kernel[grid](...)``: program
    ``i`` copies request ``i``'s first ``cu_num_blocks[i + 1] - cu_num_blocks[i]`` block ids
    from its block-table row to ``page_indices[cu_num_blocks[i]:]``."""

    def launch(
        page_indices: torch.Tensor,
        block_table: torch.Tensor,
        block_table_stride: int,
        cu_num_blocks: torch.Tensor,
        BLOCK_SIZE: int,
    ) -> None:
        del BLOCK_SIZE  # the kernel's tile width; the copy is the same for any
        # The kernel's pointer arithmetic: row i starts block_table_stride elements after row i-1.
        span = (block_table.shape[0] - 1) * block_table_stride + block_table.shape[1]
        rows = block_table.as_strided((span,), (1,))
        for i in range(grid[0]):
            start, end = int(cu_num_blocks[i]), int(cu_num_blocks[i + 1])
            row = i * block_table_stride
            page_indices[start:end] = rows[row : row + end - start]

    return launch


class _Kernel:
    """``kernel[grid](...)`` for a Python launcher."""

    def __init__(self, launcher: Callable[[tuple[int]], Callable[..., None]]) -> None:
        self.launcher = launcher

    def __getitem__(self, grid: tuple[int]) -> Callable[..., None]:
        return self.launcher(grid)


def _flashinfer_spec_era(vllm: VllmCode, case: BatchCase) -> object:
    """vLLM 0.34.0: the builder constructed and built as the runner does, with FlashInfer's own
    paths (no TRT-LLM on this platform); its page-index Triton kernel runs as an exact emulation."""
    module = vllm.module_defining("FlashInferMetadataBuilder")
    backend = module.FlashInferBackend
    if not backend.supports_head_size(case.head_size):  # refused at backend selection
        return {"metadata": {"supports_head_size": False}, "planned": []}
    module.__dict__["_copy_page_indices_kernel"] = _Kernel(copy_page_indices)
    attention_cls = vllm.module("model_executor.layers.attention").Attention
    layers: dict[str, Any] = {}
    heads = (case.num_heads, case.head_size, case.head_size**-0.5, case.num_kv_heads)
    for i, window in enumerate(case.layer_windows):
        layer = attention_cls()
        layer.impl = module.FlashInferImpl(*heads, None, window, "auto")
        layers[f"model.layers.{i}.self_attn.attn"] = layer
    specs = vllm.module_defining("FullAttentionSpec")
    spec = group_spec(specs, case)
    config = spec_era_config(case, layers)
    config.num_speculative_tokens = 0
    config.compilation_config.cudagraph_mode.decode_mode = returns("NONE")
    config.parallel_config.dcp_comm_backend = "ag_rs"
    # The engine core's layout resolution, for one worker: the backend's preferred layout.
    config.cache_config.get_resolved_kv_cache_layout = lambda: backend.supported_kv_cache_layouts()[
        0
    ]
    builder = module.FlashInferMetadataBuilder(spec, list(layers), config, torch.device("cpu"))
    # The runner may share one workspace among builders; it is never compared, so a byte will do.
    builder.set_workspace_buffer(torch.zeros(1, dtype=torch.uint8))
    table = spec_era_block_table(specs, spec, config, case)
    common = spec_era_common(vllm.defining("CommonAttentionMetadata"), case, table)
    vllm.recorder.calls.clear()
    try:
        built = builder.build(0, common)
        view = fields_beyond(
            built, ref_flashinfer.FlashInferMetadata, skip=("prefill", "decode", "kv_cache_layout")
        )
        metadata: object = {**view, "kv_cache_layout": str(built.kv_cache_layout)}
    except (ValueError, AssertionError) as exc:
        metadata = exc
    return {"metadata": metadata, "planned": _planned(vllm.recorder.calls)}


def flashinfer_reference(case: BatchCase) -> object:
    builder_cls = ref_flashinfer.FlashInferMetadataBuilder
    builder, ordered, reordering = reordered_reference(builder_cls, case, use_mla=False)
    with _plans_recorded() as recorder:
        try:
            metadata: object = metadata_fields(
                builder.build(ordered.common_prefix_len, reference_common(ordered)), skip=_WRAPPERS
            )
        except (ValueError, AssertionError) as exc:
            metadata = exc
    return {
        "reorder": reordering,
        "metadata": metadata,
        "plans": _plan_view(recorder.calls),
        "planned": _planned(recorder.calls),
        "slot_mapping_buffer": slot_buffer(builder.block_table),
    }


FLASHINFER_METADATA: Differential[BatchCase] = Differential(
    name="flashinfer-metadata",
    description="decode-first reordering, FlashInfer metadata, the wrappers' constructor and "
    "plan arguments (cascade included), head-size and all-layers hyperparameter checks",
    vllm_code="vllm/v1/attention/backends/flashinfer.py FlashInferMetadataBuilder reorder_batch, "
    "build, _plan",
    vllm_modules=modules_defining(
        *BUILDER_CODE, "FlashInferMetadataBuilder", optional=BUILDER_HELPERS
    ),
    generate=generate_flashinfer,
    run_vllm=flashinfer_vllm,
    run_reference=flashinfer_reference,
    shrink=shrink_batch,
    show=show_batch,
    trials=500,
    deviations=(
        REORDER_BY_RUNNER,
        FLASHINFER_HEAD_SIZE_CHECK_MOVED,
        FLASHINFER_WINDOW_CHECK,
        FLASHINFER_PLAN_ARGUMENTS,
        FLASHINFER_METADATA_FIELDS,
        FLASHINFER_CASCADE_REMOVED,
        SLOT_MAPPING_BY_RUNNER,
    ),
    prepare=runner_order,
)
