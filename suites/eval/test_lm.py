"""``harness-ref`` end to end through ``lm_eval.simple_evaluate`` on generated gsm8k, 5-shot.

Offline (see conftest). A model rigged to emit each problem's reference answer through the real
generation path scores 1.0 under both of lm-eval's filters; the random model scores near 0.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("lm_eval")

from lm_eval import simple_evaluate
from lm_eval.api.instance import Instance
from lm_eval.api.registry import get_model

from harness.errors import HarnessError
from harness.eval.data import Gsm8kData, load_gsm8k
from harness.eval.engine import ReferenceEngine
from harness.eval.lm import MODEL_NAME, HarnessRefLM, register
from harness.eval.task import gsm8k_task_config, gsm8k_task_manager

from .rigging import rig, scripted

pytestmark = pytest.mark.usefixtures("no_env_info")

LIMIT = 8
SMALL = Gsm8kData(
    "generated:seed=0 (first examples)", load_gsm8k().train[:300], load_gsm8k().test[:20]
)
"""The first examples of the generated splits: a quicker task to build than all 8,792."""
METRICS = ("exact_match,strict-match", "exact_match,flexible-extract")


def _evaluate(model: Any, *, limit: int = LIMIT, **kwargs: Any) -> dict[str, Any]:
    register()
    manager = gsm8k_task_manager()
    results: dict[str, Any] = simple_evaluate(
        model=model,
        tasks=[gsm8k_task_config(manager, SMALL)],
        task_manager=manager,
        num_fewshot=5,
        limit=limit,
        log_samples=False,
        **kwargs,
    )
    return results


def _rigged_lm(**model_args: Any) -> HarnessRefLM:
    """The tiny model, made to answer every test question with its reference answer."""
    register()
    batch_size = model_args.pop("batch_size", "auto")
    lm: HarnessRefLM = get_model(MODEL_NAME).create_from_arg_obj(
        {"quiet": True, "track_memory": False, **model_args}, {"batch_size": batch_size}
    )
    assert isinstance(lm.engine, ReferenceEngine)
    tokenizer = lm.harness_tokenizer
    answers = {r["question"]: r["answer"] for r in SMALL.test}

    def script(prompt: list[int]) -> list[int]:
        question = tokenizer.decode(prompt).rsplit("Question: ", 1)[1].removesuffix("\nAnswer:")
        return tokenizer.encode(f" {answers[question]}\n\nQuestion:", add_bos=False)

    rig(lm.engine.runner, scripted(script, fallback=tokenizer.eos_token_id))
    return lm


def test_by_name_the_random_model_scores_near_zero_under_both_filters() -> None:
    results = _evaluate(
        MODEL_NAME,
        model_args={"pretrained": "tiny", "max_gen_toks": 24, "quiet": True, "track_memory": False},
    )
    scores = results["results"]["gsm8k"]
    for metric in METRICS:
        assert scores[metric] <= 0.1, scores
    assert results["n-samples"]["gsm8k"]["effective"] == LIMIT
    assert results["n-shot"]["gsm8k"] == 5


def test_a_model_emitting_the_reference_answers_scores_one_in_one_engine_call() -> None:
    lm = _rigged_lm(max_num_seqs=4, max_num_batched_tokens=512)
    results = _evaluate(lm, batch_size="auto")
    scores = results["results"]["gsm8k"]
    assert all(scores[metric] == 1.0 for metric in METRICS), scores
    stats = lm.engine.stats
    assert stats.requests_per_call == [LIMIT]  # batch_size auto: everything at once
    assert max(s.num_reqs for s in stats.steps) == 4  # the scheduler batches them
    assert all(s.num_tokens <= 512 for s in stats.steps)
    assert max(s.num_tokens for s in stats.steps) == 512  # prompts are chunked to the budget


def test_an_integer_batch_size_makes_one_engine_call_per_chunk() -> None:
    lm = _rigged_lm(batch_size=2)
    results = _evaluate(lm, batch_size=2, limit=3)
    assert lm.engine.stats.requests_per_call == [2, 1]
    assert results["results"]["gsm8k"]["exact_match,strict-match"] == 1.0


def test_registering_keeps_lm_evals_builtin_models() -> None:
    register()
    register()  # idempotent
    assert get_model(MODEL_NAME) is HarnessRefLM
    assert get_model("dummy").__name__ == "DummyLM"


def test_loglikelihood_on_cpu_and_a_clear_error_on_meta() -> None:
    register()
    lm = get_model(MODEL_NAME)(pretrained="tiny", quiet=True, track_memory=False)
    context = "Question: What is 2+3?\nAnswer:"
    (continuation,) = lm.generate_until(
        [Instance("generate_until", {}, (context, {"until": ["\n"], "max_gen_toks": 3}), 0)]
    )
    (score,) = lm.loglikelihood([Instance("loglikelihood", {}, (context, continuation), 0)])
    assert score[0] < 0
    (rolling,) = lm.loglikelihood_rolling([Instance("loglikelihood_rolling", {}, ("a b c",), 0)])
    assert rolling < 0
    meta = get_model(MODEL_NAME)(pretrained="llama-3.1-8b", device="meta:h100-95")
    with pytest.raises(HarnessError, match="needs values"):
        meta.loglikelihood([Instance("loglikelihood", {}, (context, " 5"), 0)])


def test_vllm_attention_backend_is_honoured_and_the_argument_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from harness.eval.engine import SamplingParams
    from harness.eval.simulated import SimulatedEngine
    from harness.reference.backends.flash_attn import FlashAttentionBackend
    from harness.reference.backends.flashinfer import FlashInferBackend

    monkeypatch.setenv("VLLM_ATTENTION_BACKEND", "FLASH_ATTN")
    register()
    cpu = get_model(MODEL_NAME)(pretrained="tiny", quiet=True, track_memory=False)
    assert isinstance(cpu.engine, ReferenceEngine)
    assert cpu.engine.runner.attn_backend_cls is FlashAttentionBackend
    forced = get_model(MODEL_NAME)(
        pretrained="tiny", attention_backend="FLASHINFER", quiet=True, track_memory=False
    )
    assert isinstance(forced.engine, ReferenceEngine)
    assert forced.engine.runner.attn_backend_cls is FlashInferBackend
    meta = get_model(MODEL_NAME)(pretrained="meta-llama/Llama-3.1-8B-Instruct")
    assert isinstance(meta.engine, SimulatedEngine)
    meta.engine.generate([[1, 2, 3]], [SamplingParams(max_tokens=2)])
    assert meta.engine.results[-1].regression == "FlashAttentionBackend"  # what ran, not FlashInfer
