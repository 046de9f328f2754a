"""Block pool, per-group KV cache managers and the scheduler, driven by a fake runner."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.reference.block_pool import BlockPool
from harness.reference.config import SchedulerConfig
from harness.reference.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    SlidingWindowSpec,
    cdiv,
)
from harness.reference.kv_cache_manager import KVCacheManager
from harness.reference.outputs import ModelRunnerOutput, SchedulerOutput
from harness.reference.scheduler import Request, RequestStatus, Scheduler


def _full(block_size: int = 4) -> FullAttentionSpec:
    return FullAttentionSpec(
        block_size=block_size, num_kv_heads=2, head_size=8, dtype=torch.float32, use_mla=False
    )


def _sliding(block_size: int = 4, window: int = 8) -> SlidingWindowSpec:
    return SlidingWindowSpec(
        block_size=block_size,
        num_kv_heads=2,
        head_size=8,
        dtype=torch.float32,
        use_mla=False,
        sliding_window=window,
    )


def _kv_config(num_blocks: int, *specs: FullAttentionSpec | SlidingWindowSpec) -> KVCacheConfig:
    groups = [KVCacheGroupSpec([f"layer{i}"], spec) for i, spec in enumerate(specs or (_full(),))]
    return KVCacheConfig(num_blocks=num_blocks, tensors={}, kv_cache_groups=groups)


def _scheduler(
    num_blocks: int = 64,
    max_num_seqs: int = 4,
    budget: int = 16,
    max_model_len: int = 64,
    *specs: FullAttentionSpec | SlidingWindowSpec,
) -> Scheduler:
    config = SchedulerConfig(max_num_seqs, budget, max_model_len)
    return Scheduler(config, _kv_config(num_blocks, *specs))


def _fake_runner_output(scheduler: Scheduler, so: SchedulerOutput) -> ModelRunnerOutput:
    """What the runner returns: one token (id 7) for a request whose prompt is done, else none."""
    req_ids = list(so.num_scheduled_tokens)
    sampled = [
        [7] if scheduler.requests[r].num_computed_tokens >= scheduler.requests[r].num_tokens else []
        for r in req_ids
    ]
    return ModelRunnerOutput(req_ids, {r: i for i, r in enumerate(req_ids)}, sampled)


def _step(scheduler: Scheduler) -> SchedulerOutput:
    so = scheduler.schedule()
    scheduler.update_from_output(so, _fake_runner_output(scheduler, so))
    return so


# Block pool -------------------------------------------------------------------------------


def test_block_pool_reserves_the_null_block_and_recycles_fifo() -> None:
    pool = BlockPool(5)
    assert pool.null_block == 0 and pool.get_num_free_blocks() == 4
    assert pool.get_new_blocks(3) == [1, 2, 3]
    pool.free_blocks([3, 1, 0])  # the null block is never freed into the queue
    assert pool.get_new_blocks(3) == [4, 3, 1]
    with pytest.raises(ValueError, match="cannot get 2 free blocks"):
        pool.get_new_blocks(2)
    assert pool.get_num_free_blocks() == 0


def test_block_pool_reference_counts() -> None:
    pool = BlockPool(4)
    blocks = pool.get_new_blocks(2)
    pool.touch(blocks)  # a second holder (a prefix-cache hit)
    pool.free_blocks(blocks)
    assert pool.get_num_free_blocks() == 1
    pool.free_blocks(blocks)
    assert pool.get_num_free_blocks() == 3


# KV cache managers ---------------------------------------------------------------------------


def test_each_group_allocates_with_its_block_size_from_one_pool() -> None:
    manager = KVCacheManager(_kv_config(32, _full(4), _sliding(8, window=16)), max_model_len=64)
    new = manager.allocate_slots("a", num_computed_tokens=0, num_new_tokens=10)
    assert new is not None
    assert [len(ids) for ids in new] == [3, 2]  # cdiv(10, 4), cdiv(10, 8)
    assert set(new[0]).isdisjoint(new[1]) and 0 not in new[0] + new[1]
    more = manager.allocate_slots("a", num_computed_tokens=10, num_new_tokens=3)
    assert more is not None and [len(ids) for ids in more] == [1, 0]
    assert manager.get_block_ids("a") == [new[0] + more[0], new[1]]
    manager.free("a")
    assert manager.block_pool.get_num_free_blocks() == 31


def test_allocate_slots_refuses_when_the_pool_is_short() -> None:
    manager = KVCacheManager(_kv_config(5, _full(4)), max_model_len=64)
    assert manager.allocate_slots("a", 0, 16) is not None  # 4 blocks: the whole pool
    assert manager.allocate_slots("b", 0, 1) is None
    assert manager.get_block_ids("b") == [[]]


def test_sliding_window_frees_blocks_that_left_the_window() -> None:
    manager = KVCacheManager(_kv_config(16, _full(4), _sliding(4, window=8)), max_model_len=64)
    first = manager.allocate_slots("a", 0, 16)
    assert first is not None
    free_before = manager.block_pool.get_num_free_blocks()
    # The next query is position 16; it sees keys 9..16: blocks 0 and 1 (positions 0-7) are dead.
    assert manager.allocate_slots("a", 16, 1) is not None
    full_ids, sliding_ids = manager.get_block_ids("a")
    assert full_ids[:4] == first[0]
    assert sliding_ids[:4] == [0, 0, *first[1][2:]]
    # 2 freed by the window, 2 taken by position 16 (one per group).
    assert manager.block_pool.get_num_free_blocks() == free_before + 2 - 2


def test_common_prefix_blocks_are_those_every_running_request_holds() -> None:
    manager = KVCacheManager(_kv_config(16, _full(4), _sliding(4)), max_model_len=64)
    manager.allocate_slots("a", 0, 8)
    assert manager.get_num_common_prefix_blocks("a", num_running_requests=1) == [2, 0]
    manager.allocate_slots("b", 0, 8)
    assert manager.get_num_common_prefix_blocks("a", num_running_requests=2) == [0, 0]
    manager.block_pool.touch(manager.get_block_ids("a")[0][:1])  # b shares a's first block
    assert manager.get_num_common_prefix_blocks("a", num_running_requests=2) == [1, 0]


# Scheduler ---------------------------------------------------------------------------------


def test_prefill_is_chunked_to_the_token_budget_and_decodes_get_one_token() -> None:
    scheduler = _scheduler(64, 4, 8)
    scheduler.add_request(Request("short", [1, 2, 3], max_tokens=3))
    scheduler.add_request(Request("long", list(range(20)), max_tokens=1))
    so = _step(scheduler)
    assert so.num_scheduled_tokens == {"short": 3, "long": 5}
    assert [r.req_id for r in so.scheduled_new_reqs] == ["short", "long"]
    so = _step(scheduler)
    assert so.num_scheduled_tokens == {"short": 1, "long": 7}
    assert [(c.req_id, c.num_computed_tokens) for c in so.scheduled_cached_reqs] == [
        ("short", 3),
        ("long", 5),
    ]
    # As vLLM 0.9.0: new_token_ids are the scheduled tokens (the sample, the next prompt chunk).
    assert [c.new_token_ids for c in so.scheduled_cached_reqs] == [[7], list(range(5, 12))]
    so = _step(scheduler)
    assert so.num_scheduled_tokens == {"short": 1, "long": 7}
    so = scheduler.schedule()  # the prompt's last token; short finished last step
    assert so.num_scheduled_tokens == {"long": 1}
    assert so.finished_req_ids == {"short"}
    finished = scheduler.update_from_output(so, _fake_runner_output(scheduler, so))
    assert [(r.request_id, r.output_token_ids) for r in finished] == [("long", [7])]
    assert not scheduler.has_unfinished_requests()


def test_max_num_seqs_caps_the_running_batch() -> None:
    scheduler = _scheduler(64, 2, 64)
    for i in range(3):
        scheduler.add_request(Request(f"r{i}", [1, 2], max_tokens=2))
    so = _step(scheduler)
    assert sorted(so.num_scheduled_tokens) == ["r0", "r1"]
    assert [r.request_id for r in scheduler.waiting] == ["r2"]


def test_preemption_frees_the_last_admitted_request_and_recomputes_it() -> None:
    # 5 usable blocks of 4 tokens; two requests of 8 prompt tokens grow past them.
    scheduler = _scheduler(6, 4, 64, 32)
    scheduler.add_request(Request("a", list(range(8)), max_tokens=6))
    scheduler.add_request(Request("b", list(range(8)), max_tokens=6))
    _step(scheduler)  # 4 blocks
    _step(scheduler)  # both need a 3rd block: one is left, b is preempted
    assert scheduler.num_preemptions == 1
    assert scheduler.requests["b"].status == RequestStatus.PREEMPTED
    assert scheduler.requests["b"].num_computed_tokens == 0
    resumed = None
    for _ in range(20):
        so = _step(scheduler)
        resumed = next((c for c in so.scheduled_cached_reqs if c.resumed_from_preemption), None)
        if resumed is not None:
            break
    assert resumed is not None and resumed.req_id == "b" and resumed.num_computed_tokens == 0
    # The recompute covers the prompt and the token b had already produced.
    assert so.num_scheduled_tokens["b"] == 9
    assert resumed.new_token_ids == [*range(8), 7]
    assert resumed.new_block_ids == [scheduler.kv_cache_manager.get_block_ids("b")[0]]
    while scheduler.has_unfinished_requests():
        _step(scheduler)
    assert scheduler.kv_cache_manager.block_pool.get_num_free_blocks() == 5


def test_add_request_validates() -> None:
    scheduler = _scheduler(64, 4, 16, 16)
    scheduler.add_request(Request("a", [1], max_tokens=1))
    with pytest.raises(ValueError, match="duplicate"):
        scheduler.add_request(Request("a", [1], max_tokens=1))
    with pytest.raises(ValueError, match="exceeds max_model_len=16"):
        scheduler.add_request(Request("b", list(range(10)), max_tokens=7))


@settings(max_examples=30, deadline=None)
@given(
    requests=st.lists(st.tuples(st.integers(1, 30), st.integers(1, 10)), min_size=1, max_size=12),
    num_blocks=st.integers(12, 40),
    max_num_seqs=st.integers(1, 5),
    budget=st.integers(4, 40),
    hybrid=st.booleans(),
)
def test_scheduler_invariants_on_random_workloads(
    requests: list[tuple[int, int]], num_blocks: int, max_num_seqs: int, budget: int, hybrid: bool
) -> None:
    specs = (_full(4), _sliding(4, window=6)) if hybrid else (_full(4),)
    # As get_kv_cache_config guarantees: one request of max_model_len fits (or nothing progresses).
    sliding_blocks = cdiv(min(6 - 1 + budget, 48), 4) + 1 if hybrid else 0
    num_blocks = max(num_blocks, cdiv(48, 4) + sliding_blocks + 1)
    scheduler = _scheduler(num_blocks, max_num_seqs, budget, 48, *specs)
    for i, (prompt_len, max_tokens) in enumerate(requests):
        scheduler.add_request(Request(f"r{i}", list(range(prompt_len)), max_tokens))
    finished: dict[str, int] = {}
    for _ in range(2000):
        if not scheduler.has_unfinished_requests():
            break
        so = scheduler.schedule()
        # (0 right after a request preempted itself: waiting requests wait one step, as in vLLM)
        assert so.total_num_scheduled_tokens == sum(so.num_scheduled_tokens.values()) <= budget
        assert len(so.num_scheduled_tokens) <= max_num_seqs
        held: list[int] = []
        for req in scheduler.running:
            assert req.num_computed_tokens <= req.num_tokens
            ids = scheduler.kv_cache_manager.get_block_ids(req.request_id)
            assert len(ids[0]) >= cdiv(req.num_computed_tokens, 4)
            held += [b for group in ids for b in group if b != 0]
        assert len(held) == len(set(held)), "two running requests share a block"
        for req in scheduler.update_from_output(so, _fake_runner_output(scheduler, so)):
            finished[req.request_id] = len(req.output_token_ids)
    assert finished == {f"r{i}": max_tokens for i, (_, max_tokens) in enumerate(requests)}
    assert scheduler.kv_cache_manager.block_pool.get_num_free_blocks() == num_blocks - 1


def test_a_gsm8k_sized_workload_runs_to_completion() -> None:
    # 1319 requests (gsm8k's test split) through a 256-sequence batch: scale, not speed.
    rng = np.random.default_rng(0)
    scheduler = _scheduler(4096, 256, 2048, 256)
    for i in range(1319):
        prompt = rng.integers(0, 1000, int(rng.integers(20, 60))).tolist()
        scheduler.add_request(Request(f"r{i}", prompt, int(rng.integers(1, 8))))
    steps = 0
    while scheduler.has_unfinished_requests():
        _step(scheduler)
        steps += 1
    assert steps < 200 and not scheduler.requests


def test_finish_requests_frees_running_and_waiting_requests() -> None:
    # A caller that saw a stop string or EOS finishes requests from outside (vLLM's abort path).
    scheduler = _scheduler(num_blocks=64, max_num_seqs=1, budget=16)
    pool = scheduler.kv_cache_manager.block_pool
    free_before = pool.get_num_free_blocks()
    running, waiting = Request("run", [1] * 5, 10), Request("wait", [2] * 5, 10)
    scheduler.add_request(running)
    scheduler.add_request(waiting)
    _step(scheduler)  # max_num_seqs=1: "run" runs, "wait" waits
    assert running.status == RequestStatus.RUNNING and waiting.status == RequestStatus.WAITING
    scheduler.finish_requests(["run", "wait", "unknown"], RequestStatus.FINISHED_ABORTED)
    assert running.is_finished and waiting.is_finished
    assert not scheduler.has_unfinished_requests()
    assert pool.get_num_free_blocks() == free_before
    assert scheduler.schedule().finished_req_ids == {"run", "wait"}  # the runner hears of both


@given(prompt=st.integers(1, 8), output=st.integers(0, 8), data=st.data())
def test_token_ids_slice_prompt_then_output_without_joining_them(
    prompt: int, output: int, data: st.DataObject
) -> None:
    request = Request("r", list(range(prompt)), max_tokens=8)
    request.output_token_ids = list(range(100, 100 + output))
    start = data.draw(st.integers(0, prompt + output))
    stop = data.draw(st.integers(start, prompt + output))
    joined = request.prompt_token_ids + request.output_token_ids
    assert request.token_ids(start, stop) == joined[start:stop]
