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

from harness.fidelity.differential import Differential
from harness.fidelity.vllm import VllmCode
from harness.reference.block_table import BlockTable

Op = tuple[Any, ...]


@dataclass(frozen=True)
class RowOpsCase:
    """A table shape and the operations applied to it."""

    max_num_reqs: int
    max_num_blocks_per_req: int
    ops: tuple[Op, ...]


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
        if kind == "append":
            n = int(rng.integers(0, width - counts[row] + 1))
            ops.append(("append", tuple(int(b) for b in rng.integers(1, 1000, n)), row))
            counts[row] += n
        elif kind == "add":
            n = int(rng.integers(0, width + 1))
            ops.append(("add", tuple(int(b) for b in rng.integers(1, 1000, n)), row))
            counts[row] = n
        elif kind == "move":
            ops.append(("move", row, other))
            counts[other] = counts[row]
        elif kind == "swap":
            ops.append(("swap", row, other))
            counts[row], counts[other] = counts[other], counts[row]
        elif kind == "commit":
            ops.append(("commit", int(rng.integers(0, rows + 1))))
        else:
            ops.append(("clear",))
            # vLLM 0.9.0 keeps the row counts on clear(); later appends continue from them
    return RowOpsCase(rows, width, tuple(ops))


def _valid(case: RowOpsCase) -> bool:
    counts = [0] * case.max_num_reqs
    for op in case.ops:
        if op[0] == "append":
            counts[op[2]] += len(op[1])
            if counts[op[2]] > case.max_num_blocks_per_req:
                return False
        elif op[0] == "add":
            counts[op[2]] = len(op[1])
        elif op[0] == "move":
            counts[op[2]] = counts[op[1]]
        elif op[0] == "swap":
            counts[op[1]], counts[op[2]] = counts[op[2]], counts[op[1]]
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
    for op in case.ops:
        if op[0] == "append":
            table.append_row(list(op[1]), op[2])
        elif op[0] == "add":
            table.add_row(list(op[1]), op[2])
        elif op[0] == "move":
            table.move_row(op[1], op[2])
        elif op[0] == "swap":
            table.swap_row(op[1], op[2])
        elif op[0] == "commit":
            table.commit(op[1])
        else:
            table.clear()
        snapshots.append(
            {
                "block_table_cpu": table.get_cpu_tensor().clone(),
                "num_blocks_per_row": table.num_blocks_per_row.copy(),
                "block_table": table.get_device_tensor().clone(),
            }
        )
    return snapshots


def row_ops_vllm(vllm: VllmCode, case: RowOpsCase) -> object:
    module = vllm.module("v1.worker.block_table")
    table = module.BlockTable(
        case.max_num_reqs, case.max_num_blocks_per_req, 4, False, torch.device("cpu")
    )
    return _apply(table, case)


def row_ops_reference(case: RowOpsCase) -> object:
    table = BlockTable(16, case.max_num_reqs, case.max_num_blocks_per_req, 4, False, "cpu")
    return _apply(table, case)


BLOCK_TABLE_ROW_OPS: Differential[RowOpsCase] = Differential(
    name="block-table-row-ops",
    description="append/add/move/swap/commit/clear: CPU rows, row counts and device rows after "
    "every operation",
    vllm_code="vllm/v1/worker/block_table.py BlockTable",
    vllm_modules=("vllm.v1.worker.block_table",),
    generate=generate_row_ops,
    run_vllm=row_ops_vllm,
    run_reference=row_ops_reference,
    shrink=shrink_row_ops,
    trials=500,
)
