"""Metadata builders: FlashAttention, FlashInfer (with its plans) and the MLA decode/prefill split.

Each trial builds one KV cache group's metadata for a random batch on both sides: vLLM 0.9.0's
builder class with a stub runner carrying the batch (its ``build(num_reqs, num_actual_tokens,
max_query_len, common_prefix_len, common_attn_metadata)``), the reference's builder with its own
signature. Decode-first builders reorder the batch first; the swaps they make are compared too.
The group's device slot-mapping buffer is compared after the build (0.9.0's FlashAttention builder
writes it with a -1 tail; FlashInfer and MLA leave it alone).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace
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
    reference_block_table,
    reference_common,
    reference_config,
    reorder,
    returns,
    runner_order,
    show_batch,
    shrink_batch,
    spec_era_block_table,
    spec_era_common,
    spec_era_config,
    vllm_block_table,
    vllm_build,
    vllm_common,
    vllm_runner,
)
from harness.fidelity.differentials.builder_deviations import (
    BLOCK_SIZE_CHECK_MOVED,
    BLOCK_TABLE_WIDTH,
    CASCADE_FIELDS_REMOVED,
    DCP_FIELDS,
    FLASHINFER_CASCADE_REMOVED,
    FLASHINFER_HEAD_SIZE_CHECK_MOVED,
    FLASHINFER_METADATA_FIELDS,
    FLASHINFER_PLAN_ARGUMENTS,
    FLASHINFER_WINDOW_CHECK,
    MLA_CHUNKED_CONTEXT,
    MLA_HEAD_SIZES,
    MLA_METADATA_FIELDS,
    REORDER_BY_RUNNER,
    SLOT_MAPPING_BY_RUNNER,
    at,
)
from harness.fidelity.differentials.kv_cache import LayerSpec, make_spec
from harness.fidelity.era import Era
from harness.fidelity.stubs import PlanRecorder, recording_flashinfer
from harness.fidelity.vllm import VllmCode
from harness.reference import kv_cache_interface
from harness.reference.backends import flashinfer as ref_flashinfer
from harness.reference.backends.flash_attn import (
    FlashAttentionBackend,
    FlashAttentionMetadata,
    FlashAttentionMetadataBuilder,
)
from harness.reference.backends.mla.common import (
    MLACommonDecodeMetadata,
    MLACommonMetadata,
    MLACommonMetadataBuilder,
    MLACommonPrefillMetadata,
)
from harness.reference.kv_cache_interface import AttentionSpec


def _group_spec(module: Any, case: BatchCase, use_mla: bool = False) -> Any:
    """The group's spec under vLLM 0.9.0's unified grouping of the case's layers."""
    windows = {w for w in case.layer_windows if w is not None}
    window = windows.pop() if windows else None
    sliding = window is not None and all(w is not None for w in case.layer_windows)
    layer = LayerSpec(
        kind="sliding" if sliding else "full",
        block_size=case.block_size,
        num_kv_heads=case.num_kv_heads,
        head_size=case.head_size,
        dtype=case.dtype,
        use_mla=use_mla,
        window=window,
    )
    return make_spec(module, layer)


def _reference_spec(case: BatchCase, use_mla: bool = False) -> AttentionSpec:
    spec: AttentionSpec = _group_spec(kv_cache_interface, case, use_mla)
    return spec


def _buffer(table: Any) -> torch.Tensor:
    buffer: torch.Tensor = table.slot_mapping
    return buffer.clone()


def _reordered_vllm(
    vllm: VllmCode, builder_cls: Any, case: BatchCase, use_mla: bool, layers: dict[str, Any]
) -> tuple[Any, BatchCase, dict[str, Any], Any]:
    """vLLM's decode-first builder after its ``reorder_batch`` on ``case``: the builder, now
    holding the reordered batch, the reordered case, the reordering and the common metadata."""
    spec = _group_spec(vllm.module_defining("FullAttentionSpec"), case, use_mla)
    builder = builder_cls(vllm_runner(case, layers), spec, None)
    ordered, reordering = reorder(case, builder.reorder_batch)
    builder.runner = vllm_runner(ordered, layers)
    builder.block_table = vllm_block_table(vllm.module_defining("BlockTable"), ordered)
    common = vllm_common(vllm.module_defining("CommonAttentionMetadata"), ordered)
    return builder, ordered, reordering, common


def _reordered_reference(
    builder_cls: Any, case: BatchCase, use_mla: bool
) -> tuple[Any, BatchCase, dict[str, Any]]:
    """The reference's decode-first builder after its ``reorder_batch`` on ``case``: a builder of
    the reordered batch, the reordered case and the reordering."""
    spec, config = _reference_spec(case, use_mla), reference_config(case)
    builder = builder_cls(spec, reference_block_table(case), config, "cpu")
    ordered, reordering = reorder(case, builder.reorder_batch)
    return builder_cls(spec, reference_block_table(ordered), config, "cpu"), ordered, reordering


# FlashAttention ---------------------------------------------------------------------------------


def generate_flash_attn(rng: np.random.Generator) -> BatchCase:
    """Block sizes that FlashAttention accepts and the 16-multiples it rejects."""
    case = generate_batch(rng, block_sizes=(16, 32, 16, 32, 8), head_sizes=(64, 128))
    if rng.random() < 0.3:
        window = int(rng.choice([8, 40]))
        case = replace(
            case, layer_windows=(None, window) if rng.random() < 0.5 else (window, window)
        )
    return case


def _block_size_check(check: Callable[[], object]) -> object:
    try:
        check()
    except ValueError as exc:
        return exc
    return None


def flash_attn_vllm(vllm: VllmCode, case: BatchCase) -> object:
    if vllm.era is Era.SPEC:
        return _flash_attn_spec_era(vllm, case)
    module = vllm.module_defining("FlashAttentionMetadataBuilder")
    refused = _block_size_check(
        lambda: module.FlashAttentionBackend.get_kv_cache_shape(
            8, case.block_size, case.num_kv_heads, case.head_size
        )
    )
    if refused is not None:
        return {"block_size_check": refused}
    table = vllm_block_table(vllm.module_defining("BlockTable"), case)
    spec = _group_spec(vllm.module_defining("FullAttentionSpec"), case)
    builder = module.FlashAttentionMetadataBuilder(vllm_runner(case), spec, table)
    common = vllm_common(vllm.module_defining("CommonAttentionMetadata"), case)
    metadata = vllm_build(builder, common, case, case.common_prefix_len)
    return {
        "block_size_check": None,
        "metadata": metadata_fields(
            metadata,
            none_only=("scheduler_metadata", "prefix_scheduler_metadata", "local_attn_metadata"),
        ),
        "slot_mapping_buffer": _buffer(table),
    }


def _flash_attn_spec_era(vllm: VllmCode, case: BatchCase) -> object:
    """vLLM 0.34.0: the backend's ``supports_block_size``, and the builder constructed and built
    as the runner does (``common_prefix_len`` 0: cascade attention is gone)."""
    module = vllm.module_defining("FlashAttentionMetadataBuilder")
    if not module.FlashAttentionBackend.supports_block_size(case.block_size):
        return {"block_size_check": False}
    specs = vllm.module_defining("FullAttentionSpec")
    spec = _group_spec(specs, case)
    config = spec_era_config(case)
    names = [f"model.layers.{i}.self_attn.attn" for i in range(len(case.layer_windows))]
    builder = module.FlashAttentionMetadataBuilder(spec, names, config, torch.device("cpu"))
    table = spec_era_block_table(specs, spec, config, case)
    common = spec_era_common(vllm.defining("CommonAttentionMetadata"), case, table)
    return {
        "block_size_check": True,
        "metadata": fields_beyond(builder.build(0, common), FlashAttentionMetadata),
    }


def flash_attn_reference(case: BatchCase) -> object:
    refused = _block_size_check(
        lambda: FlashAttentionBackend.get_kv_cache_shape(
            8, case.block_size, case.num_kv_heads, case.head_size
        )
    )
    if refused is not None:
        return {"block_size_check": refused}
    table = reference_block_table(case)
    builder = FlashAttentionMetadataBuilder(
        _reference_spec(case), table, reference_config(case), "cpu"
    )
    metadata = builder.build(case.common_prefix_len, reference_common(case))
    return {
        "block_size_check": None,
        "metadata": metadata_fields(metadata),
        "slot_mapping_buffer": _buffer(table),
    }


FLASH_ATTN_METADATA: Differential[BatchCase] = Differential(
    name="flash-attn-metadata",
    description="FlashAttention metadata (cascade split included), the block-size check and the "
    "device slot-mapping buffer",
    vllm_code="vllm/v1/attention/backends/flash_attn.py FlashAttentionMetadataBuilder.build, "
    "get_kv_cache_shape",
    vllm_modules=modules_defining(
        *BUILDER_CODE, "FlashAttentionMetadataBuilder", optional=BUILDER_HELPERS
    ),
    generate=generate_flash_attn,
    run_vllm=flash_attn_vllm,
    run_reference=flash_attn_reference,
    shrink=shrink_batch,
    show=show_batch,
    trials=1000,
    deviations=(
        BLOCK_SIZE_CHECK_MOVED,
        CASCADE_FIELDS_REMOVED,
        DCP_FIELDS,
        BLOCK_TABLE_WIDTH,
        SLOT_MAPPING_BY_RUNNER,
    ),
)


# FlashInfer -------------------------------------------------------------------------------------


def generate_flashinfer(rng: np.random.Generator) -> BatchCase:
    """Any block size; head sizes FlashInfer accepts and one it rejects; sometimes mixed windows."""
    case = generate_batch(rng, block_sizes=(1, 16, 32), head_sizes=(64, 128, 256, 64, 32))
    roll = rng.random()
    if roll < 0.15:
        case = replace(case, layer_windows=(None, 40))  # window_left differs: vLLM asserts
    elif roll < 0.3:
        case = replace(case, layer_windows=(40, 40))
    return case


def _plan_view(calls: list[tuple[str, str, tuple[Any, ...], dict[str, Any]]]) -> list[object]:
    """Each ``plan`` with the constructor arguments of its wrapper (workspace buffer left out)."""
    inits: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
    planned: list[object] = []
    for kind, event, args, kwargs in calls:
        if event == "init":
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
    sys.modules["flashinfer"] = recording_flashinfer(recorder)
    try:
        yield recorder
    finally:
        ref_flashinfer.flashinfer_available = saved_available
        if saved_module is None:
            del sys.modules["flashinfer"]
        else:
            sys.modules["flashinfer"] = saved_module


_WRAPPERS = ("prefill_wrapper", "decode_wrapper", "cascade_wrapper")


PlanCalls = list[tuple[str, str, tuple[Any, ...], dict[str, Any]]]

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
    for kind, event, args, kwargs in calls:
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
    builder, ordered, reordering, common = _reordered_vllm(vllm, builder_cls, case, False, layers)
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
        "slot_mapping_buffer": _buffer(builder.block_table),
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
    spec = _group_spec(specs, case)
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
    builder, ordered, reordering = _reordered_reference(builder_cls, case, use_mla=False)
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
        "slot_mapping_buffer": _buffer(builder.block_table),
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


# MLA --------------------------------------------------------------------------------------------


def generate_mla(rng: np.random.Generator) -> BatchCase:
    """One latent KV head of 576 (and sometimes 512, which vLLM rejects); no prefix."""
    case = generate_batch(
        rng, block_sizes=(1, 16, 64), head_sizes=(576, 576, 576, 512), prefix=False
    )
    return replace(case, num_kv_heads=1, num_heads=int(rng.choice([16, 128])), common_prefix_len=0)


def _mla_view(metadata: Any, reference: bool) -> dict[str, Any]:
    fields = metadata_fields(metadata, skip=("decode", "prefill"))
    fields["decode"] = None if metadata.decode is None else metadata_fields(metadata.decode)
    prefill = metadata.prefill
    fields["prefill"] = (
        None
        if prefill is None
        # vLLM 0.9.0 carries chunked-context metadata (None here: chunked prefill is off in the
        # stub runner); the reference carries seq_lens instead (docs/fidelity.md).
        else metadata_fields(
            prefill, skip=("seq_lens",) if reference else (), none_only=("chunked_context",)
        )
    )
    return fields


def mla_vllm(vllm: VllmCode, case: BatchCase) -> object:
    if vllm.era is Era.SPEC:
        return _mla_spec_era(vllm, case)
    builder_cls = vllm.defining("MLACommonMetadataBuilder")
    builder, ordered, reordering, common = _reordered_vllm(vllm, builder_cls, case, True, {})
    try:
        metadata: object = _mla_view(vllm_build(builder, common, ordered, 0), reference=False)
    except ValueError as exc:
        metadata = exc
    table = builder.block_table
    return {"reorder": reordering, "metadata": metadata, "slot_mapping_buffer": _buffer(table)}


class _PrefillBackend:
    """A stand-in for the MLA prefill kernel backend the layer owns (vLLM 0.34.0): named like
    none of vLLM's, so no backend-specific path is taken; it prepares nothing."""

    def clone(self) -> _PrefillBackend:
        return self

    def get_name(self) -> str:
        return "HARNESS_STAND_IN"

    def prepare_metadata(self, metadata: object) -> None:
        del metadata


def _mla_spec_era(vllm: VllmCode, case: BatchCase) -> object:
    """vLLM 0.34.0: the builder of ``vllm/model_executor/layers/attention/mla_attention.py``,
    constructed and built as the runner does, for a DeepSeek-shaped latent (the last 64 of the
    head size is the rotary part)."""
    specs = vllm.module_defining("FullAttentionSpec")
    spec = _group_spec(specs, case, use_mla=True)
    layer = SimpleNamespace(
        q_lora_rank=None,
        kv_lora_rank=case.head_size - 64,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        prefill_backend=_PrefillBackend(),
    )
    names = ["model.layers.0.self_attn.attn"]
    config = spec_era_config(case, {names[0]: layer})
    builder_cls = vllm.defining("MLACommonMetadataBuilder")
    builder = builder_cls(spec, names, config, torch.device("cpu"))
    table = spec_era_block_table(specs, spec, config, case)
    common = spec_era_common(vllm.defining("CommonAttentionMetadata"), case, table)
    try:
        metadata: object = _mla_spec_era_view(builder.build(0, common))
    except ValueError as exc:
        metadata = exc
    return {"metadata": metadata}


def _mla_spec_era_view(metadata: Any) -> dict[str, Any]:
    """vLLM 0.34.0's MLA metadata as the reference's classes have it; the chunked context as the
    context lengths it covers (not its workspace)."""
    fields = fields_beyond(metadata, MLACommonMetadata, skip=("decode", "prefill"))
    decode, prefill = metadata.decode, metadata.prefill
    fields["decode"] = None if decode is None else fields_beyond(decode, MLACommonDecodeMetadata)
    fields["prefill"] = None
    if prefill is not None:
        view = fields_beyond(
            prefill, MLACommonPrefillMetadata, skip=("prefill_backend", "chunked_context")
        )
        if prefill.chunked_context is not None:
            view["chunked_context"] = prefill.chunked_context.context_lens
        fields["prefill"] = view
    return fields


def mla_reference(case: BatchCase) -> object:
    builder, ordered, reordering = _reordered_reference(MLACommonMetadataBuilder, case, True)
    try:
        metadata: object = _mla_view(builder.build(0, reference_common(ordered)), reference=True)
    except ValueError as exc:
        metadata = exc
    table = builder.block_table
    return {"reorder": reordering, "metadata": metadata, "slot_mapping_buffer": _buffer(table)}


MLA_SPLIT: Differential[BatchCase] = Differential(
    name="mla-split",
    description="MLA decode-first reordering and decode/prefill split (counts, block tables, "
    "lengths, query starts), slot mapping, the head-size check",
    vllm_code="MLACommonMetadataBuilder reorder_batch, build (vllm/v1/attention/backends/mla/"
    "common.py)",
    vllm_modules=modules_defining(
        *BUILDER_CODE, "MLACommonMetadataBuilder", optional=BUILDER_HELPERS
    ),
    generate=generate_mla,
    run_vllm=mla_vllm,
    run_reference=mla_reference,
    shrink=shrink_batch,
    show=show_batch,
    trials=500,
    deviations=(
        REORDER_BY_RUNNER,
        MLA_HEAD_SIZES,
        MLA_METADATA_FIELDS,
        MLA_CHUNKED_CONTEXT,
        at(BLOCK_TABLE_WIDTH, "metadata.decode.block_table", "metadata.prefill.block_table"),
        SLOT_MAPPING_BY_RUNNER,
    ),
    prepare=runner_order,
)
