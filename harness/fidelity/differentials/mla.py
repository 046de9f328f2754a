"""MLA: decode-first reordering and the decode/prefill split of the common MLA builder."""

from __future__ import annotations

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
    reference_common,
    runner_order,
    show_batch,
    shrink_batch,
    spec_era_block_table,
    spec_era_common,
    spec_era_config,
    vllm_build,
)
from harness.fidelity.differentials.builder_deviations import (
    BLOCK_TABLE_WIDTH,
    MLA_CHUNKED_CONTEXT,
    MLA_HEAD_SIZES,
    MLA_METADATA_FIELDS,
    REORDER_BY_RUNNER,
    SLOT_MAPPING_BY_RUNNER,
    at,
)
from harness.fidelity.differentials.builders import (
    group_spec,
    reordered_reference,
    reordered_vllm,
    slot_buffer,
)
from harness.fidelity.vllm import VllmCode
from harness.reference.backends.mla.common import (
    MLACommonDecodeMetadata,
    MLACommonMetadata,
    MLACommonMetadataBuilder,
    MLACommonPrefillMetadata,
)
from harness.vllm_tree.era import Era


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
    builder, ordered, reordering, common = reordered_vllm(vllm, builder_cls, case, True, {})
    try:
        metadata: object = _mla_view(vllm_build(builder, common, ordered, 0), reference=False)
    except ValueError as exc:
        metadata = exc
    table = builder.block_table
    return {"reorder": reordering, "metadata": metadata, "slot_mapping_buffer": slot_buffer(table)}


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
    spec = group_spec(specs, case, use_mla=True)
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
    builder, ordered, reordering = reordered_reference(MLACommonMetadataBuilder, case, True)
    try:
        metadata: object = _mla_view(builder.build(0, reference_common(ordered)), reference=True)
    except ValueError as exc:
        metadata = exc
    table = builder.block_table
    return {"reorder": reordering, "metadata": metadata, "slot_mapping_buffer": slot_buffer(table)}


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
