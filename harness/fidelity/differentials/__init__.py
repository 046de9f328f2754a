"""Every differential, in report order (a plain tuple: nothing registers itself on import)."""

from __future__ import annotations

from typing import Any

from harness.fidelity.differential import Differential
from harness.fidelity.differentials.block_table import BLOCK_TABLE_ROW_OPS
from harness.fidelity.differentials.builders import FLASH_ATTN_METADATA
from harness.fidelity.differentials.cascade import CASCADE
from harness.fidelity.differentials.flashinfer import FLASHINFER_METADATA
from harness.fidelity.differentials.kv_cache import KV_CACHE_CONFIG, KV_CACHE_SPECS
from harness.fidelity.differentials.memory import DETERMINE_AVAILABLE_MEMORY
from harness.fidelity.differentials.mla import MLA_SPLIT
from harness.fidelity.differentials.runner_inputs import RUNNER_INPUTS

DIFFERENTIALS: tuple[Differential[Any], ...] = (
    KV_CACHE_SPECS,
    KV_CACHE_CONFIG,
    DETERMINE_AVAILABLE_MEMORY,
    BLOCK_TABLE_ROW_OPS,
    RUNNER_INPUTS,
    FLASH_ATTN_METADATA,
    FLASHINFER_METADATA,
    CASCADE,
    MLA_SPLIT,
)
