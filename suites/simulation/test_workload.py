"""The gsm8k-shaped workload: size, determinism, and the lengths its docstring derives."""

from __future__ import annotations

import statistics

import pytest

from harness.errors import HarnessError
from harness.simulation import workload
from harness.simulation.workload import GSM8K_SCHEDULER_LIMITS, MAX_GEN_TOKS, get_workload, gsm8k


def test_gsm8k_has_one_request_per_test_example() -> None:
    w = gsm8k()
    assert len(w.requests) == 1319
    assert len({r.request_id for r in w.requests}) == 1319


def test_gsm8k_is_deterministic_and_seeded() -> None:
    assert gsm8k() == gsm8k()
    assert gsm8k(seed=1) != gsm8k(seed=2)


def test_gsm8k_prompt_lengths_match_the_derivation() -> None:
    prompts = [r.prompt_len for r in gsm8k().requests]
    # 1 + 5 * (62 + 105 + 6) + 64 + 5 tokens on average (module docstring).
    assert 900 < statistics.mean(prompts) < 970
    # Five independent shots: no 5-shot prompt is shorter than ~500 or longer than ~2000 tokens.
    assert min(prompts) > 500 and max(prompts) < 2000
    assert statistics.stdev(prompts) > 50


def test_gsm8k_outputs_stop_at_the_stop_string_or_max_gen_toks() -> None:
    outputs = [r.output_len for r in gsm8k().requests]
    assert max(outputs) == MAX_GEN_TOKS
    assert min(outputs) >= workload.STOP_TOKENS + 1
    assert 90 < statistics.mean(outputs) < 130
    capped = sum(o == MAX_GEN_TOKS for o in outputs)
    assert 0.005 * len(outputs) < capped < 0.06 * len(outputs)


def test_gsm8k_uses_vllm_large_gpu_defaults() -> None:
    limits = gsm8k().limits
    assert limits == GSM8K_SCHEDULER_LIMITS
    assert (limits.max_num_seqs, limits.max_num_batched_tokens) == (1024, 16384)
    assert limits.max_model_len == 131072


def test_tiny_workload_fits_the_tiny_model() -> None:
    w = get_workload("tiny")
    assert all(r.prompt_len + r.output_len <= w.limits.max_model_len for r in w.requests)


def test_unknown_workload_lists_the_available_ones() -> None:
    with pytest.raises(HarnessError, match="available: gsm8k, tiny"):
        get_workload("mmlu")


def test_num_requests_must_be_positive() -> None:
    with pytest.raises(HarnessError):
        gsm8k(num_requests=0)
