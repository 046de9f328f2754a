"""The meta-device engine: the length model, vLLM's default limits, and the 8B shape on a
simulated H100 through lm-eval, with and without the FlashInfer regression."""

from __future__ import annotations

import statistics

import pytest

from harness.eval.simulated import output_length, vllm_default_limits
from harness.memory.devices import get_device_profile


def test_the_length_model_is_seeded_per_prompt_and_capped() -> None:
    prompts = [[1, 2, i] for i in range(2000)]
    lengths = [output_length(p, 256, seed=0) for p in prompts]
    assert lengths == [output_length(p, 256, seed=0) for p in prompts]  # order-independent
    assert lengths != [output_length(p, 256, seed=1) for p in prompts]
    assert all(1 <= n <= 256 for n in lengths)
    assert all(output_length(p, 40, seed=0) <= 40 for p in prompts[:50])
    # gsm8k answers: ~276 characters at ~2.6 Llama 3 characters per token, plus 3 stop tokens;
    # about 1% never stop and run to max_tokens.
    assert 95 < statistics.mean(lengths) < 130
    assert 5 <= lengths.count(256) <= 60


@pytest.mark.parametrize(
    ("profile", "expected"),
    [("h100-95", (1024, 16384)), ("b200", (1024, 16384)), ("a100-80", (256, 8192))],
)
def test_vllm_default_limits(profile: str, expected: tuple[int, int]) -> None:
    limits = vllm_default_limits(get_device_profile(profile), 2048)
    assert (limits.max_num_seqs, limits.max_num_batched_tokens) == expected


@pytest.mark.usefixtures("no_env_info")
def test_llama_8b_on_a_simulated_h100_completes_without_the_regression() -> None:
    pytest.importorskip("lm_eval")
    from harness.eval.gsm8k import EvalOptions, evaluate_gsm8k

    report = evaluate_gsm8k(EvalOptions(model="llama-3.1-8b", limit=4, max_gen_toks=16, quiet=True))
    assert report.config["device"] == "meta:h100-95"
    assert report.exit_code == 0 and report.memory.oom is None
    scores = report.results["results"]["gsm8k"]
    assert "exact_match,strict-match" in scores and "exact_match,flexible-extract" in scores
    engine = report.engine
    assert engine["num_requests"] == 4 and engine["num_generate_calls"] == 1
    assert 0 < engine["steps"] <= 17 and engine["num_generated_tokens"] <= 4 * 16
    simulation = report.memory.simulation
    assert simulation is not None and simulation["num_blocks"] > 30000
    assert report.memory.peak_bytes <= get_device_profile("h100-95").total_memory
