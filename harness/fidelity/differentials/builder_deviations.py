"""How vLLM 0.34.0's metadata builders and their runner moved away from vLLM 0.9.0's.

Each :class:`~harness.fidelity.deviation.Deviation` here is found in a tree by structure and
explains differences at named places of the builder differentials' outcomes, with a predicate
as narrow as the change: a padded block table must hold the reference's rows, an absent field
must be absent, not different.
"""

from __future__ import annotations

from typing import Any, cast

from harness.fidelity.deviation import ABSENT, Deviation
from harness.fidelity.tree import Location, VllmTree

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
