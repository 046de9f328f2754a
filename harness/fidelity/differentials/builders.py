"""Metadata builders: what every builder differential shares, and the FlashAttention one.

Each trial builds one KV cache group's metadata for a random batch on both sides: vLLM's builder
class (vLLM 0.9.0's with a stub runner carrying the batch and its ``build(num_reqs,
num_actual_tokens, max_query_len, common_prefix_len, common_attn_metadata)``; vLLM 0.34.0's
constructed from the spec, layer names and config, built from ``CommonAttentionMetadata`` as its
runner does), and the reference's builder with its own signature. Decode-first builders reorder
the batch first; the swaps they make are compared too. The group's device slot-mapping buffer is
compared after the build (0.9.0's FlashAttention builder writes it with a -1 tail; FlashInfer and
MLA leave it alone).
"""

from __future__ import annotations

from collections.abc import Callable
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
    reference_block_table,
    reference_common,
    reference_config,
    reorder,
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
    SLOT_MAPPING_BY_RUNNER,
)
from harness.fidelity.differentials.kv_cache import LayerSpec, make_spec
from harness.fidelity.vllm import VllmCode
from harness.reference import kv_cache_interface
from harness.reference.backends.flash_attn import (
    FlashAttentionBackend,
    FlashAttentionMetadata,
    FlashAttentionMetadataBuilder,
)
from harness.reference.kv_cache_interface import AttentionSpec
from harness.vllm_tree.era import Era


def group_spec(module: Any, case: BatchCase, use_mla: bool = False) -> Any:
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


def reference_spec(case: BatchCase, use_mla: bool = False) -> AttentionSpec:
    spec: AttentionSpec = group_spec(kv_cache_interface, case, use_mla)
    return spec


def slot_buffer(table: Any) -> torch.Tensor:
    buffer: torch.Tensor = table.slot_mapping
    return buffer.clone()


def reordered_vllm(
    vllm: VllmCode, builder_cls: Any, case: BatchCase, use_mla: bool, layers: dict[str, Any]
) -> tuple[Any, BatchCase, dict[str, Any], Any]:
    """vLLM's decode-first builder after its ``reorder_batch`` on ``case``: the builder, now
    holding the reordered batch, the reordered case, the reordering and the common metadata."""
    spec = group_spec(vllm.module_defining("FullAttentionSpec"), case, use_mla)
    builder = builder_cls(vllm_runner(case, layers), spec, None)
    ordered, reordering = reorder(case, builder.reorder_batch)
    builder.runner = vllm_runner(ordered, layers)
    builder.block_table = vllm_block_table(vllm.module_defining("BlockTable"), ordered)
    common = vllm_common(vllm.module_defining("CommonAttentionMetadata"), ordered)
    return builder, ordered, reordering, common


def reordered_reference(
    builder_cls: Any, case: BatchCase, use_mla: bool
) -> tuple[Any, BatchCase, dict[str, Any]]:
    """The reference's decode-first builder after its ``reorder_batch`` on ``case``: a builder of
    the reordered batch, the reordered case and the reordering."""
    spec, config = reference_spec(case, use_mla), reference_config(case)
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
    spec = group_spec(vllm.module_defining("FullAttentionSpec"), case)
    builder = module.FlashAttentionMetadataBuilder(vllm_runner(case), spec, table)
    common = vllm_common(vllm.module_defining("CommonAttentionMetadata"), case)
    metadata = vllm_build(builder, common, case, case.common_prefix_len)
    return {
        "block_size_check": None,
        "metadata": metadata_fields(
            metadata,
            none_only=("scheduler_metadata", "prefix_scheduler_metadata", "local_attn_metadata"),
        ),
        "slot_mapping_buffer": slot_buffer(table),
    }


def _flash_attn_spec_era(vllm: VllmCode, case: BatchCase) -> object:
    """vLLM 0.34.0: the backend's ``supports_block_size``, and the builder constructed and built
    as the runner does (``common_prefix_len`` 0: cascade attention is gone)."""
    module = vllm.module_defining("FlashAttentionMetadataBuilder")
    if not module.FlashAttentionBackend.supports_block_size(case.block_size):
        return {"block_size_check": False}
    specs = vllm.module_defining("FullAttentionSpec")
    spec = group_spec(specs, case)
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
        reference_spec(case), table, reference_config(case), "cpu"
    )
    metadata = builder.build(case.common_prefix_len, reference_common(case))
    return {
        "block_size_check": None,
        "metadata": metadata_fields(metadata),
        "slot_mapping_buffer": slot_buffer(table),
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
