"""BlockTable / MultiGroupBlockTable: the slot-mapping vector and the row API against a model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.reference.block_table import BlockTable, MultiGroupBlockTable


def _batch(computed: list[int], scheduled: list[int]) -> tuple[np.ndarray, np.ndarray]:
    req_indices = np.repeat(np.arange(len(scheduled)), scheduled)
    positions = np.concatenate(
        [np.arange(c, c + s) for c, s in zip(computed, scheduled, strict=True)]
    )
    return req_indices, positions


def test_slot_mapping_vector() -> None:
    table = BlockTable(4, 2, 4, 16, pin_memory=False, device="cpu")
    table.add_row([7, 3], 0)
    table.add_row([5], 1)
    assert table.block_table_np.tolist() == [[7, 3, 0, 0], [5, 0, 0, 0]]
    req_indices, positions = _batch(computed=[2, 0], scheduled=[5, 3])
    table.compute_slot_mapping(req_indices, positions)
    assert table.slot_mapping_np[:8].tolist() == [30, 31, 12, 13, 14, 20, 21, 22]
    table.commit_slot_mapping(8)
    assert table.slot_mapping[:8].tolist() == [30, 31, 12, 13, 14, 20, 21, 22]
    assert table.slot_mapping.dtype == torch.int64


def test_each_group_uses_its_own_block_size() -> None:
    tables = MultiGroupBlockTable(2, 16, 16, False, "cpu", block_sizes=[4, 8])
    tables.add_row([[7, 3], [2]], 0)
    req_indices, positions = _batch(computed=[2], scheduled=[5])
    tables.compute_slot_mapping(req_indices, positions)
    assert tables[0].slot_mapping_np[:5].tolist() == [30, 31, 12, 13, 14]
    assert tables[1].slot_mapping_np[:5].tolist() == [18, 19, 20, 21, 22]


def test_position_without_block_is_an_error() -> None:
    table = BlockTable(4, 1, 4, 16, False, "cpu")
    table.add_row([1], 0)
    with pytest.raises(IndexError, match="position 4"):
        table.compute_slot_mapping(np.array([0]), np.array([4]))


def test_row_overflow_is_an_error() -> None:
    table = BlockTable(4, 1, 2, 16, False, "cpu")
    with pytest.raises(ValueError, match="max_num_blocks_per_req"):
        table.add_row([1, 2, 3], 0)


def test_group_count_must_match() -> None:
    tables = MultiGroupBlockTable(2, 16, 16, False, "cpu", block_sizes=[4, 8])
    with pytest.raises(ValueError, match="there are 2"):
        tables.add_row([[1]], 0)


def test_commit_copies_rows_to_the_device_and_works_on_meta() -> None:
    cpu = BlockTable(4, 3, 4, 16, False, "cpu")
    cpu.add_row([1, 2], 0)
    cpu.add_row([3], 1)
    cpu.commit(2)
    assert cpu.block_table[:2].tolist() == [[1, 2, 0, 0], [3, 0, 0, 0]]
    meta = BlockTable(4, 3, 4, 16, False, "meta")
    meta.add_row([1, 2], 0)
    meta.commit(1)
    meta.compute_slot_mapping(np.array([0, 0]), np.array([0, 5]))
    assert meta.slot_mapping_np[:2].tolist() == [4, 9]
    assert meta.block_table.device.type == "meta"


# A plain-Python model of one block table: a list of block-id lists per row.
_ops = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 3), st.lists(st.integers(1, 99), max_size=3)),
    st.tuples(st.just("append"), st.integers(0, 3), st.lists(st.integers(1, 99), max_size=3)),
    st.tuples(st.just("move"), st.integers(0, 3), st.integers(0, 3)),
    st.tuples(st.just("swap"), st.integers(0, 3), st.integers(0, 3)),
    st.tuples(st.just("clear"), st.just(0), st.just(0)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_ops, max_size=25))
def test_row_api_matches_a_plain_model(ops: list[tuple[str, int, object]]) -> None:
    max_blocks = 8
    table = BlockTable(2, 4, max_blocks, 4 * max_blocks * 2, False, "cpu")
    model: list[list[int]] = [[] for _ in range(4)]
    for op, row, arg in ops:
        if op in ("add", "append"):
            assert isinstance(arg, list)
            new = arg if op == "add" else model[row] + arg
            if len(new) > max_blocks:
                with pytest.raises(ValueError):
                    (table.add_row if op == "add" else table.append_row)(arg, row)
                continue
            (table.add_row if op == "add" else table.append_row)(arg, row)
            model[row] = list(new)
        elif op == "move":
            assert isinstance(arg, int)
            table.move_row(row, arg)
            model[arg] = list(model[row])
        elif op == "swap":
            assert isinstance(arg, int)
            table.swap_row(row, arg)
            model[row], model[arg] = model[arg], model[row]
        else:  # vLLM 0.9.0: clear() zeroes the rows but keeps the row counts
            table.clear()
            model = [[0] * len(blocks) for blocks in model]
        for r, blocks in enumerate(model):
            assert int(table.num_blocks_per_row[r]) == len(blocks)
            assert table.block_table_np[r, : len(blocks)].tolist() == blocks
    # The slot mapping agrees with the model for every valid position.
    rows = [r for r, blocks in enumerate(model) if blocks]
    if rows:
        req_indices = np.concatenate([np.full(len(model[r]) * 2, r) for r in rows])
        positions = np.concatenate([np.arange(len(model[r]) * 2) for r in rows])
        table.compute_slot_mapping(req_indices, positions)
        expected = [
            model[r][p // 2] * 2 + p % 2 for r, p in zip(req_indices, positions, strict=True)
        ]
        assert table.slot_mapping_np[: len(positions)].tolist() == expected
