"""Block-table row operations against vLLM's ``BlockTable``.

A trial is a random sequence of ``append_row`` / ``add_row`` / ``move_row`` / ``swap_row`` /
``commit`` / ``clear`` on one table; after every operation the CPU rows, the per-row block counts
and the device rows are compared. Rows never overflow (vLLM corrupts its counts on overflow where
the reference raises first; ``docs/fidelity.md``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from harness.fidelity.deviation import Deviation
from harness.fidelity.differential import Differential, modules_defining
from harness.fidelity.vllm import VllmCode
from harness.reference.block_table import BlockTable
from harness.vllm_tree.tree import Location, VllmTree

Op = tuple[Any, ...]


@dataclass(frozen=True)
class RowOpsCase:
    """A table shape and the operations applied to it."""

    max_num_reqs: int
    max_num_blocks_per_req: int
    ops: tuple[Op, ...]


def _count(op: Op, counts: list[int]) -> None:
    """Update the per-row block counts after ``op``."""
    if op[0] == "append":
        counts[op[2]] += len(op[1])
    elif op[0] == "add":
        counts[op[2]] = len(op[1])
    elif op[0] == "move":
        counts[op[2]] = counts[op[1]]
    elif op[0] == "swap":
        counts[op[1]], counts[op[2]] = counts[op[2]], counts[op[1]]
    # vLLM 0.9.0 keeps the row counts on clear(); later appends continue from them


def generate_row_ops(rng: np.random.Generator) -> RowOpsCase:
    """5-40 valid operations on a table of 1-6 rows of 1-8 blocks."""
    rows = int(rng.integers(1, 7))
    width = int(rng.integers(1, 9))
    counts = [0] * rows
    ops: list[Op] = []
    for _ in range(int(rng.integers(5, 41))):
        kind = str(
            rng.choice(
                ["append", "add", "move", "swap", "commit", "clear"],
                p=[0.3, 0.2, 0.15, 0.15, 0.15, 0.05],
            )
        )
        row, other = int(rng.integers(rows)), int(rng.integers(rows))
        op: Op = (kind, row, other)  # move, swap
        if kind in ("append", "add"):
            n = int(rng.integers(0, width - (counts[row] if kind == "append" else 0) + 1))
            op = (kind, tuple(int(b) for b in rng.integers(1, 1000, n)), row)
        elif kind == "commit":
            op = ("commit", int(rng.integers(0, rows + 1)))
        elif kind == "clear":
            op = ("clear",)
        _count(op, counts)
        ops.append(op)
    return RowOpsCase(rows, width, tuple(ops))


def _valid(case: RowOpsCase) -> bool:
    counts = [0] * case.max_num_reqs
    for op in case.ops:
        _count(op, counts)
        if max(counts) > case.max_num_blocks_per_req:
            return False
    return True


def shrink_row_ops(case: RowOpsCase) -> Iterator[RowOpsCase]:
    """Drop operations (last first), then shorten the block lists."""
    for i in reversed(range(len(case.ops))):
        candidate = replace(case, ops=case.ops[:i] + case.ops[i + 1 :])
        if _valid(candidate):
            yield candidate
    for i, op in enumerate(case.ops):
        if op[0] in ("append", "add") and op[1]:
            shorter = (op[0], op[1][:-1], op[2])
            candidate = replace(case, ops=(*case.ops[:i], shorter, *case.ops[i + 1 :]))
            if _valid(candidate):
                yield candidate


def _apply(table: Any, case: RowOpsCase) -> list[object]:
    snapshots: list[object] = []
    for kind, *args in case.ops:
        if kind in ("append", "add"):
            args[0] = list(args[0])
        getattr(table, f"{kind}_row" if kind in ("append", "add", "move", "swap") else kind)(*args)
        snapshots.append(
            {
                "block_table_cpu": table.get_cpu_tensor().clone(),
                "num_blocks_per_row": table.num_blocks_per_row.copy(),
                "block_table": table.get_device_tensor().clone(),
            }
        )
    return snapshots


def row_ops_vllm(vllm: VllmCode, case: RowOpsCase) -> object:
    table = vllm.defining("BlockTable")(
        case.max_num_reqs, case.max_num_blocks_per_req, 4, False, torch.device("cpu")
    )
    return _apply(table, case)


def row_ops_reference(case: RowOpsCase) -> object:
    table = BlockTable(16, case.max_num_reqs, case.max_num_blocks_per_req, 4, False, "cpu")
    return _apply(table, case)


def _row_tables_replaced(tree: VllmTree) -> Location | None:
    """vLLM 0.34.0 has no V1 ``BlockTable``; its runner's tables are ``BlockTables``."""
    if tree.module_defining("BlockTable", under=("vllm.v1",)) is not None:
        return None
    module = tree.module_defining("BlockTables", under=("vllm.v1.worker",))
    return None if module is None else tree.location(module, "BlockTables")


ROW_TABLES_REPLACED = Deviation(
    "row-tables-replaced",
    "replaced the persistent batch's BlockTable (append/add/move/swap rows as requests are "
    "reordered, commit, clear) with BlockTables, whose rows are written per request-state index "
    "(append_block_ids) and gathered for each step by Triton kernels",
    _row_tables_replaced,
    paths=None,
)


BLOCK_TABLE_ROW_OPS: Differential[RowOpsCase] = Differential(
    name="block-table-row-ops",
    description="append/add/move/swap/commit/clear: CPU rows, row counts and device rows after "
    "every operation",
    vllm_code="BlockTable (vllm/v1/worker/block_table.py)",
    vllm_modules=modules_defining("BlockTable"),
    generate=generate_row_ops,
    run_vllm=row_ops_vllm,
    run_reference=row_ops_reference,
    shrink=shrink_row_ops,
    trials=500,
    deviations=(ROW_TABLES_REPLACED,),
)
