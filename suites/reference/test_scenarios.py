"""Named scenarios: the oracle agrees on every step, and each scenario's metadata is snapshotted."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import torch

from harness.errors import HarnessError
from harness.reference.scenarios import (
    DEFAULT_SCENARIO,
    SCENARIOS,
    ScenarioResult,
    StepRecord,
    dense_check,
    get_scenario,
    record_step,
    run_scenario,
    scenario_engine,
    summarize_value,
)
from harness.reference.scheduler import Request, Scheduler


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_metadata_matches_golden(name: str, golden: Any) -> None:
    result = run_scenario(get_scenario(name))
    assert result.steps and result.oracle_ok, [s.max_abs_err for s in result.steps]
    golden.check(f"reference/{name}", result.golden_data())


def test_golden_data_is_deterministic() -> None:
    first = run_scenario(get_scenario("mixed-prefill-decode")).golden_data()
    assert run_scenario(get_scenario("mixed-prefill-decode")).golden_data() == first


def test_hybrid_default_has_two_groups_with_their_own_tables() -> None:
    result = run_scenario(get_scenario(DEFAULT_SCENARIO))
    first = result.steps[0]
    assert [g.kv_cache_spec for g in first.groups] == ["FullAttentionSpec", "SlidingWindowSpec"]
    full, sliding = first.groups
    assert full.block_table != sliding.block_table
    assert full.slot_mapping != sliding.slot_mapping
    assert full.metadata["slot_mapping"] == full.slot_mapping
    assert sliding.metadata["slot_mapping"] == sliding.slot_mapping


def test_hybrid_unified_is_vllm_0_9_0s_single_group() -> None:
    result = run_scenario(get_scenario("hybrid-unified"))
    assert get_scenario(
        "hybrid-unified"
    ).vllm_config.scheduler_config.disable_hybrid_kv_cache_manager
    for step in result.steps:
        (group,) = step.groups
        assert group.kv_cache_spec == "FullAttentionSpec" and len(group.layer_names) == 4
    two_groups = run_scenario(get_scenario("hybrid-two-groups"))
    assert [s.num_scheduled_tokens for s in result.steps] == [
        s.num_scheduled_tokens for s in two_groups.steps
    ]


def test_mixed_scenario_is_reordered_decode_first() -> None:
    result = run_scenario(get_scenario("mixed-prefill-decode"))
    mixed = [
        s for s in result.steps if 1 in s.num_scheduled_tokens and max(s.num_scheduled_tokens) > 1
    ]
    assert mixed, "the scenario must mix decodes and prefills in one step"
    for step in mixed:
        assert step.num_scheduled_tokens == sorted(step.num_scheduled_tokens, key=lambda n: n > 1)


def test_cascade_scenario_splits_the_shared_prefix_then_decodes_plainly() -> None:
    result = run_scenario(get_scenario("cascade-common-prefix"))
    use_cascade = [s.groups[0].metadata["use_cascade"] for s in result.steps]
    assert use_cascade == [False, True, False]
    assert result.steps[1].groups[0].metadata["common_prefix_len"] == 256
    assert result.oracle_ok


def test_chunked_and_preemption_scenarios_do_what_they_say() -> None:
    chunked = run_scenario(get_scenario("chunked-prefill"))
    assert all(sum(s.num_scheduled_tokens) <= 8 for s in chunked.steps)
    assert run_scenario(get_scenario("preemption")).num_preemptions >= 1


def test_a_nan_in_a_later_request_is_the_steps_error() -> None:
    """Python's ``max(0.1, nan)`` is 0.1: a NaN must not vanish from the reported error."""
    scenario = get_scenario("mixed-prefill-decode")
    runner = scenario_engine(scenario).runner
    assert runner.kv_cache_config is not None
    scheduler = Scheduler(scenario.vllm_config.scheduler_config, runner.kv_cache_config)
    scheduler.add_request(Request("a", [1, 2, 3], 2))
    scheduler.add_request(Request("b", [4, 5], 2))
    trace = runner.execute_model(scheduler.schedule(), trace=True).trace
    assert trace is not None and trace.hidden_states is not None
    hidden_states = trace.hidden_states.clone()
    hidden_states[int(trace.query_start_loc[1])] = float("nan")  # b's first row
    trace = dataclasses.replace(trace, hidden_states=hidden_states)
    assert math.isnan(dense_check(runner.get_model(), trace))
    assert not record_step(trace, 0, runner.get_model()).oracle_ok
    steps = [StepRecord(i, [], [], [], [], err, False) for i, err in enumerate([0.1, math.nan])]
    assert math.isnan(ScenarioResult(scenario, steps).max_abs_err)


def test_unknown_scenario_lists_the_names() -> None:
    with pytest.raises(HarnessError, match=r"unknown scenario 'nope'; available: cascade-common"):
        get_scenario("nope")


def test_summaries_are_json_friendly() -> None:
    assert summarize_value(torch.tensor([1, 2], dtype=torch.int32)) == [1, 2]
    assert summarize_value(torch.empty(10_000, dtype=torch.uint8)) == {
        "shape": [10000],
        "dtype": "uint8",
    }
    assert summarize_value(torch.empty(3, device="meta")) == {"shape": [3], "dtype": "float32"}
    assert summarize_value(torch.bfloat16) == "bfloat16"
    assert summarize_value(object()) == "object"
