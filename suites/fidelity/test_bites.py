"""The differentials catch deliberately broken reference functions (against the fake tree).

The fake tree implements vLLM 0.9.0's spec and block-table semantics in our own words; each test
breaks one reference function the way the issue found it broken (or plausibly could be) and checks
that the differential reports a disagreement, shrunk to a small input. The same kind of check
against vLLM 0.9.0's real source runs in ``make fidelity`` (test_bites_vllm.py).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from harness.fidelity.differential import Differential, DifferentialResult, run_differential
from harness.fidelity.differentials.block_table import BLOCK_TABLE_ROW_OPS
from harness.fidelity.differentials.kv_cache import KV_CACHE_SPECS
from harness.fidelity.vllm import open_vllm
from harness.reference.block_table import BlockTable
from harness.reference.kv_cache_interface import FullAttentionSpec, KVCacheSpec
from harness.vllm_tree.tree import VllmTree

from .conftest import FAKE_MODULES


def _run(tree: VllmTree, differential: Differential[Any], trials: int = 80) -> DifferentialResult:
    with open_vllm(tree, FAKE_MODULES) as vllm:
        return run_differential(differential, vllm, seed=0, trials=trials)


def test_both_differentials_agree_with_the_fake_tree(fake_vllm: VllmTree) -> None:
    for differential in (KV_CACHE_SPECS, BLOCK_TABLE_ROW_OPS):
        assert _run(fake_vllm, differential).ok


def _merge_dropping_the_window(cls: type[FullAttentionSpec], specs: list[KVCacheSpec]) -> Any:
    return copy.deepcopy(specs[0])  # the reference before issue 10: no FullAttentionSpec.merge


def _clear_resetting_counts(self: BlockTable) -> None:
    self.block_table.fill_(0)
    self.block_table_cpu.fill_(0)
    self.num_blocks_per_row.fill(0)  # what the reference did before the differential found it


def _move_row_off_by_one(self: BlockTable, src: int, tgt: int) -> None:
    n = int(self.num_blocks_per_row[src])
    self.block_table_np[tgt, : n - 1] = self.block_table_np[src, : n - 1]
    self.num_blocks_per_row[tgt] = n


BREAKAGES: list[tuple[str, Differential[Any], object, str, Callable[..., Any], str]] = [
    ("merge-drops-window", KV_CACHE_SPECS, FullAttentionSpec, "merge",
     classmethod(_merge_dropping_the_window), ".merge"),
    ("clear-resets-counts", BLOCK_TABLE_ROW_OPS, BlockTable, "clear", _clear_resetting_counts,
     "num_blocks_per_row"),
    ("move-row-off-by-one", BLOCK_TABLE_ROW_OPS, BlockTable, "move_row", _move_row_off_by_one,
     "block_table"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("differential", "owner", "attribute", "broken", "where"),
    [b[1:] for b in BREAKAGES],
    ids=[b[0] for b in BREAKAGES],
)
def test_a_broken_reference_is_caught_and_shrunk(
    fake_vllm: VllmTree,
    monkeypatch: pytest.MonkeyPatch,
    differential: Differential[Any],
    owner: object,
    attribute: str,
    broken: Callable[..., Any],
    where: str,
) -> None:
    monkeypatch.setattr(owner, attribute, broken)
    result = _run(fake_vllm, differential)
    assert not result.ok and result.error is None and result.agreed < result.trials
    assert result.disagreement is not None and where in result.disagreement.difference
    assert result.disagreement.shrink_steps > 0 and len(result.disagreement.input) < 400
