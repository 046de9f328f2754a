"""The persistent batch: rows, holes, condensing and swaps, block tables of every group included."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.reference.input_batch import CachedRequestState, InputBatch


def _batch(max_num_reqs: int = 4) -> InputBatch:
    return InputBatch(
        max_num_reqs=max_num_reqs,
        max_model_len=16,
        max_num_batched_tokens=32,
        device=torch.device("cpu"),
        pin_memory=False,
        block_sizes=[4, 8],
    )


def _req(i: int, num_prompt: int = 3, num_output: int = 1) -> CachedRequestState:
    return CachedRequestState(
        req_id=f"r{i}",
        prompt_token_ids=[100 * i + t for t in range(num_prompt)],
        block_ids=[[10 + i, 20 + i], [30 + i]],
        num_computed_tokens=i,
        output_token_ids=[100 * i + 50 + t for t in range(num_output)],
    )


def _row(batch: InputBatch, req_id: str) -> tuple[list[int], int, list[list[int]]]:
    """What the batch holds for ``req_id``: tokens, computed tokens, each group's blocks."""
    i = batch.req_id_to_index[req_id]
    tokens = batch.token_ids_cpu[i, : batch.num_tokens[i]].tolist()
    blocks = [
        t.block_table_np[i, : t.num_blocks_per_row[i]].tolist()
        for t in batch.block_table.block_tables
    ]
    return tokens, int(batch.num_computed_tokens_cpu[i]), blocks


def _expected(req: CachedRequestState) -> tuple[list[int], int, list[list[int]]]:
    return req.prompt_token_ids + req.output_token_ids, req.num_computed_tokens, req.block_ids


def test_add_request_fills_every_array_and_every_group() -> None:
    batch = _batch()
    batch.add_request(_req(0))
    batch.add_request(_req(1, num_prompt=5, num_output=0))
    assert batch.req_ids == ["r0", "r1"] and batch.num_reqs == 2
    assert _row(batch, "r1") == _expected(_req(1, num_prompt=5, num_output=0))
    assert _row(batch, "r0") == _expected(_req(0))


def test_remove_then_condense_moves_the_last_rows_into_the_holes() -> None:
    batch = _batch()
    reqs = [_req(i) for i in range(4)]
    for req in reqs:
        batch.add_request(req)
    holes = sorted((batch.remove_request("r0"), batch.remove_request("r2")), reverse=True)
    assert batch.remove_request("nope") is None
    batch.condense([h for h in holes if h is not None])
    assert batch.req_ids == ["r3", "r1"]
    for req in (reqs[1], reqs[3]):
        assert _row(batch, req.req_id) == _expected(req)


def test_swap_states_swaps_block_table_rows_of_every_group() -> None:
    batch = _batch()
    a, b = _req(0, num_prompt=2), _req(1, num_prompt=6)
    batch.add_request(a)
    batch.add_request(b)
    batch.swap_states(0, 1)
    assert batch.req_ids == ["r1", "r0"]
    assert batch.req_id_to_index == {"r1": 0, "r0": 1}
    assert _row(batch, "r0") == _expected(a) and _row(batch, "r1") == _expected(b)


def test_rows_beyond_max_num_reqs_are_refused() -> None:
    batch = _batch(max_num_reqs=1)
    batch.add_request(_req(0))
    with pytest.raises(ValueError, match="max_num_reqs=1"):
        batch.add_request(_req(1))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["add", "remove", "swap"]), st.integers(0, 7)), max_size=30)
)
def test_batch_matches_a_dict_of_requests(ops: list[tuple[str, int]]) -> None:
    # Plain-Python model: the set of requests (order is the batch's business). After every
    # operation (remove + condense as the runner does it), each request's row holds its data.
    batch = _batch(max_num_reqs=8)
    model: dict[str, CachedRequestState] = {}
    for op, i in ops:
        if op == "add" and f"r{i}" not in model and len(model) < 8:
            model[f"r{i}"] = _req(i, num_prompt=1 + i % 5, num_output=i % 3)
            batch.add_request(model[f"r{i}"])
        elif op == "remove" and f"r{i}" in model:
            del model[f"r{i}"]
            hole = batch.remove_request(f"r{i}")
            assert hole is not None
            batch.condense([hole])
        elif op == "swap" and len(model) >= 2:
            batch.swap_states(i % len(model), (i + 1) % len(model))
        assert sorted(batch.req_ids) == sorted(model)
        assert [batch.req_id_to_index[r] for r in batch.req_ids] == list(range(len(model)))
        for req_id, req in model.items():
            assert _row(batch, req_id) == _expected(req)
