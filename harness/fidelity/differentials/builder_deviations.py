"""How vLLM 0.34.0's metadata builders and their runner moved away from vLLM 0.9.0's.

Each :class:`~harness.fidelity.deviation.Deviation` here is found in a tree by structure and
explains differences at named places of the builder differentials' outcomes, with a predicate
as narrow as the change: a padded block table must hold the reference's rows, an absent field
must be absent, not different.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any, cast

from harness.fidelity.deviation import ABSENT, Deviation
from harness.vllm_tree.tree import Location, VllmTree

CASCADE_FIELDS = (
    "use_cascade",
    "common_prefix_len",
    "cu_prefix_query_lens",
    "prefix_kv_lens",
    "suffix_kv_lens",
)
"""FlashAttention metadata's cascade split (vLLM 0.9.0, the reference)."""


def absent(vllm: Any, reference: Any) -> bool:
    """vLLM no longer has it."""
    del reference
    return bool(vllm == ABSENT)


def _block_size_refused_alike(vllm: Any, reference: Any) -> bool:
    """``supports_block_size`` accepts where ``get_kv_cache_shape`` does not raise, and refuses
    where it raises ``ValueError``."""
    if vllm is True:
        return reference is None
    refused = isinstance(reference, dict) and cast("dict[str, Any]", reference).get("raises")
    return vllm is False and refused == "ValueError"


def _padded_rows(vllm: Any, reference: Any) -> bool:
    """vLLM's table holds the reference's rows, followed by zeros only."""
    if not (isinstance(vllm, dict) and isinstance(reference, dict)):
        return False
    theirs, ours = cast("dict[str, Any]", vllm), cast("dict[str, Any]", reference)
    if theirs.get("tensor") != ours.get("tensor") or "values" not in theirs:
        return False
    rows, width = ours["shape"]
    if theirs["shape"][0] != rows or theirs["shape"][1] < width:
        return False
    values: list[list[int]] = theirs["values"]
    return all(
        row[:width] == ref and not any(row[width:])
        for row, ref in zip(values, ours["values"], strict=True)
    )


def _no_context_parallelism(vllm: Any, reference: Any) -> bool:
    """One rank: the decode-context-parallel length is 0 (the reference has no such field)."""
    return bool(vllm == 0 and reference == ABSENT)


def _head_size_accepted(vllm: Any, reference: Any) -> bool:
    """vLLM builds where the reference refuses that head size with a ``ValueError``."""
    if not (isinstance(vllm, dict) and isinstance(reference, dict)):
        return False
    theirs, ours = cast("dict[str, Any]", vllm), cast("dict[str, Any]", reference)
    head_dim = theirs.get("head_dim")
    message = str(ours.get("message", ""))
    return ours.get("raises") == "ValueError" and f"received {head_dim}" in message


def only_vllm(vllm: Any, reference: Any) -> bool:
    """Only vLLM has it (the reference has no such field)."""
    del vllm
    return bool(reference == ABSENT)


def _flash_attn_module(tree: VllmTree) -> str | None:
    return tree.module_defining("FlashAttentionMetadataBuilder")


def _block_size_check_moved(tree: VllmTree) -> Location | None:
    module = _flash_attn_module(tree)
    if module is None or tree.find(module, "FlashAttentionBackend.get_kv_cache_shape") is not None:
        return None
    return tree.location(module, "FlashAttentionBackend.get_supported_kernel_block_sizes")


def cascade_removed(tree: VllmTree) -> Location | None:
    """vLLM 0.34.0 defines no ``use_cascade_attention``; ``ModelConfig.disable_cascade_attn``
    stays, documented as having no effect."""
    if tree.module_defining("use_cascade_attention") is not None:
        return None
    config = tree.module_defining("ModelConfig", under=("vllm.config",))
    kept = None if config is None else tree.location(config, "ModelConfig.disable_cascade_attn")
    module = _flash_attn_module(tree)
    return kept or (None if module is None else tree.location(module, "FlashAttentionMetadata"))


def _dcp_fields(tree: VllmTree) -> Location | None:
    module = _flash_attn_module(tree)
    if module is None:
        return None
    return tree.location(module, "FlashAttentionMetadata.max_dcp_context_kv_len")


def _block_table_width(tree: VllmTree) -> Location | None:
    module = tree.module_defining("get_block_table_width")
    return None if module is None else tree.location(module, "get_block_table_width")


def _slot_mapping_by_runner(tree: VllmTree) -> Location | None:
    if tree.module_defining("BlockTable", under=("vllm.v1",)) is not None:
        return None
    module = tree.module_defining("BlockTables", under=("vllm.v1.worker",))
    return None if module is None else tree.location(module, "BlockTables.compute_slot_mappings")


def _mla_module(tree: VllmTree) -> str | None:
    return tree.module_defining("MLACommonMetadataBuilder")


def _reorder_by_runner(tree: VllmTree) -> Location | None:
    module = _mla_module(tree)
    if module is None or tree.find(module, "MLACommonMetadataBuilder.reorder_batch") is not None:
        return None
    runner = tree.module_defining("GPUModelRunner")
    return None if runner is None else tree.location(runner, "sort_batch_req_ids")


def _mla_head_sizes(tree: VllmTree) -> Location | None:
    """The head sizes ``MLACommonBackend.get_supported_head_sizes`` returns, where they are
    more than vLLM 0.9.0's 576."""
    module = _mla_module(tree)
    node = (
        None if module is None else tree.find(module, "MLACommonBackend.get_supported_head_sizes")
    )
    if module is None or node is None:
        return None
    sizes = {
        c.value
        for r in ast.walk(node)
        if isinstance(r, ast.Return) and isinstance(r.value, ast.List)
        for c in r.value.elts
        if isinstance(c, ast.Constant)
    }
    return None if sizes <= {576} else tree.at(module, node.lineno)


def _mla_metadata_fields(tree: VllmTree) -> Location | None:
    module = _mla_module(tree)
    return None if module is None else tree.location(module, "MLACommonMetadata.num_reqs")


def _mla_chunked_context(tree: VllmTree) -> Location | None:
    module = _mla_module(tree)
    if module is None:
        return None
    return tree.uses(module, "MLACommonMetadataBuilder.build", "build_mla_chunked_context_metadata")


BLOCK_SIZE_CHECK_MOVED = Deviation(
    "block-size-check-moved",
    "moved FlashAttention's block-size check from get_kv_cache_shape (a ValueError when the "
    "KV cache is allocated) to supports_block_size at backend selection, over the kernel "
    "block sizes the backend declares (the same sizes are accepted)",
    _block_size_check_moved,
    paths=("block_size_check",),
    explains=_block_size_refused_alike,
)
CASCADE_FIELDS_REMOVED = Deviation(
    "cascade-removed",
    "removed cascade attention and FlashAttention metadata's cascade fields (use_cascade, "
    "common_prefix_len, cu_prefix_query_lens, prefix_kv_lens, suffix_kv_lens); every build "
    "gets common_prefix_len 0",
    cascade_removed,
    paths=tuple(f"metadata.{name}" for name in CASCADE_FIELDS),
    explains=absent,
)
DCP_FIELDS = Deviation(
    "dcp-fields",
    "added decode context parallelism to FlashAttention metadata (max_dcp_context_kv_len, "
    "dcp_context_kv_lens, a decode/prefill split); on one rank build sets "
    "max_dcp_context_kv_len to 0",
    _dcp_fields,
    paths=("metadata.max_dcp_context_kv_len",),
    explains=_no_context_parallelism,
)
BLOCK_TABLE_WIDTH = Deviation(
    "block-table-width",
    "pads every block-table row to a multiple of 128 tokens (get_block_table_width, called by "
    "the runner): the builders see wider tables, zeros past each row's blocks",
    _block_table_width,
    paths=("metadata.block_table",),
    explains=_padded_rows,
)
SLOT_MAPPING_BY_RUNNER = Deviation(
    "slot-mapping-by-runner",
    "has the runner, not the builder, write the device slot mapping (-1 past the scheduled "
    "tokens) with BlockTables.compute_slot_mappings; builders receive it in "
    "CommonAttentionMetadata",
    _slot_mapping_by_runner,
    paths=("slot_mapping_buffer",),
    explains=absent,
)
REORDER_BY_RUNNER = Deviation(
    "reorder-by-runner",
    "moved decode-first reordering out of the builders (reorder_batch, swaps) into the model "
    "runner, which sorts every batch by query length before any builder sees it "
    "(sort_batch_req_ids); both sides here get the batch in that order",
    _reorder_by_runner,
    paths=("reorder",),
    explains=absent,
)
MLA_HEAD_SIZES = Deviation(
    "mla-head-sizes",
    "accepts MLA head sizes 320, 512 and 576 (MLACommonBackend.get_supported_head_sizes), "
    "where 0.9.0 accepts 576 only",
    _mla_head_sizes,
    paths=("metadata",),
    explains=_head_size_accepted,
)
MLA_METADATA_FIELDS = Deviation(
    "mla-metadata-fields",
    "added batch fields to MLA metadata (num_reqs, max_query_len, max_seq_len) and the prefill "
    "kernels' fields to its prefill metadata (q_data_type, output_dtype, query_lens_cpu)",
    _mla_metadata_fields,
    paths=(
        "metadata.num_reqs",
        "metadata.max_query_len",
        "metadata.max_seq_len",
        "metadata.prefill.q_data_type",
        "metadata.prefill.output_dtype",
        "metadata.prefill.query_lens_cpu",
    ),
    explains=only_vllm,
)
MLA_CHUNKED_CONTEXT = Deviation(
    "mla-chunked-context",
    "builds chunked-context metadata (workspace-sized chunks of the computed context) for every "
    "prefill with context, with no chunked-prefill switch; the reference keeps the prefills' "
    "seq_lens instead",
    _mla_chunked_context,
    paths=("metadata.prefill.chunked_context",),
    explains=only_vllm,
)


def _flashinfer_module(tree: VllmTree) -> str | None:
    return tree.module_defining("FlashInferMetadataBuilder")


def _plans_by_keyword(tree: VllmTree) -> Location | None:
    module = _flashinfer_module(tree)
    if module is None:
        return None
    return tree.uses(module, "FlashInferMetadataBuilder.build", "head_dim_qk")


def _plans_hold_the_pages(tree: VllmTree) -> Location | None:
    module = _flashinfer_module(tree)
    if module is None or tree.find(module, "FlashInferMetadata.paged_kv_indptr") is not None:
        return None
    return tree.location(module, "FlashInferMetadata")


def _cascade_planned(vllm: Any, reference: Any) -> bool:
    """The reference planned a cascade wrapper, which vLLM no longer has."""
    del vllm
    plans = cast("list[object]", reference) if isinstance(reference, list) else []
    return any(
        isinstance(p, dict) and cast("dict[str, Any]", p).get("wrapper") == "cascade" for p in plans
    )


def _head_size_refused_alike(vllm: Any, reference: Any) -> bool:
    """vLLM refuses the head size at backend selection where the reference's metadata raises."""
    if vllm != {"supports_head_size": False} or not isinstance(reference, dict):
        return False
    ours = cast("dict[str, Any]", reference)
    return ours.get("raises") == "ValueError" and "head_dim" in str(ours.get("message"))


def _head_size_check_moved(tree: VllmTree) -> Location | None:
    module = _flashinfer_module(tree)
    if module is None or tree.find(module, "FlashInferMetadata.__post_init__") is not None:
        return None
    return tree.location(module, "FlashInferBackend.get_supported_head_sizes")


FLASHINFER_HEAD_SIZE_CHECK_MOVED = Deviation(
    "head-size-check-moved",
    "moved FlashInfer's head-size check from the metadata (a ValueError in build) to backend "
    "selection (supports_head_size, over 64, 128, 256 and 512)",
    _head_size_check_moved,
    paths=("metadata",),
    explains=_head_size_refused_alike,
)


def _windows_refused_earlier(vllm: Any, reference: Any) -> bool:
    """vLLM's ``ValueError`` about window lefts where the reference asserts on all parameters."""
    if not (isinstance(vllm, dict) and isinstance(reference, dict)):
        return False
    theirs, ours = cast("dict[str, Any]", vllm), cast("dict[str, Any]", reference)
    return (
        theirs.get("raises") == "ValueError"
        and "Window left" in str(theirs.get("message"))
        and ours.get("raises") == "AssertionError"
    )


def _window_check(tree: VllmTree) -> Location | None:
    module = _flashinfer_module(tree)
    if module is None:
        return None
    return tree.uses(module, "FlashInferMetadataBuilder.build", "has_same_window_lefts")


FLASHINFER_WINDOW_CHECK = Deviation(
    "window-check",
    "refuses a group whose layers have different sliding windows with a ValueError (window "
    "lefts) before asserting that all layers share every hyperparameter",
    _window_check,
    paths=("metadata",),
    explains=_windows_refused_earlier,
)
FLASHINFER_PLAN_ARGUMENTS = Deviation(
    "plan-arguments",
    "plans FlashInfer's wrappers with other arguments: keywords only, head_dim_qk for the "
    "prefill, the decode through fast_plan_decode, seq_lens, o_data_type, fixed_split_size and "
    "disable_split_kv added, wrappers built with a backend and the decode wrapper always with "
    "tensor cores; what the plans fix (page tables, heads, scale, window, soft cap, dtypes) is "
    "compared by name",
    _plans_by_keyword,
    paths=("plans",),
    explains=absent,
)
FLASHINFER_METADATA_FIELDS = Deviation(
    "metadata-fields",
    "keeps FlashInfer's page tables, head layout and dtypes only in the wrappers' plans "
    "(FIPrefill, FIDecode), and adds kv_cache_layout, per-phase query dtypes and causal to the "
    "metadata",
    _plans_hold_the_pages,
    paths=(
        *(
            f"metadata.{name}"
            for name in (
                "qo_indptr",
                "paged_kv_indptr",
                "paged_kv_indices",
                "paged_kv_last_page_len",
                "num_qo_heads",
                "num_kv_heads",
                "head_dim",
                "page_size",
                "data_type",
                "q_data_type",
            )
        ),
        "metadata.kv_cache_layout",
        "metadata.q_data_type_prefill",
        "metadata.q_data_type_decode",
        "metadata.causal",
    ),
    explains=lambda vllm, reference: ABSENT in (vllm, reference),
)
FLASHINFER_CASCADE_REMOVED = Deviation(
    "cascade-removed",
    "removed cascade attention and FlashInfer's cascade wrapper: a batch with a shared prefix is "
    "planned as prefills and decodes",
    cascade_removed,
    paths=(
        "planned",
        "metadata.use_cascade",
        "metadata.shared_qo_indptr",
        "metadata.shared_kv_page_indptr",
        "metadata.shared_kv_page_indices",
        "metadata.shared_kv_last_page_len",
    ),
    explains=lambda vllm, reference: vllm == ABSENT or _cascade_planned(vllm, reference),
)


def at(deviation: Deviation, *paths: str) -> Deviation:
    """``deviation`` explaining the same change at other places of an outcome."""
    return dataclasses.replace(deviation, paths=paths)
