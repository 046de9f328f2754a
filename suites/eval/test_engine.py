"""The CPU engine: vLLM's generate loop over the reference scheduler and runner."""

from __future__ import annotations

import dataclasses

import pytest

from harness.eval.engine import ReferenceEngine, SamplingParams
from harness.eval.tokenizer import Tokenizer
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.reference.config import SchedulerConfig, VllmConfig, get_model_config

from .rigging import rig, scripted

TOKENIZER = Tokenizer.train(["the answer is 42 and then Question: next"] * 2)


def _engine(
    max_num_seqs: int = 8, max_num_batched_tokens: int = 256, track_memory: bool = False
) -> ReferenceEngine:
    tiny = get_model_config("tiny")
    model = dataclasses.replace(tiny, vocab_size=TOKENIZER.vocab_size, max_model_len=512)
    limits = SchedulerConfig(max_num_seqs, max_num_batched_tokens, model.max_model_len)
    config = VllmConfig(model_config=model, scheduler_config=limits)
    return ReferenceEngine(
        config, TOKENIZER, backend=FlashInferBackend, num_gpu_blocks=256, track_memory=track_memory
    )


def test_all_requests_together_batched_within_the_scheduler_limits() -> None:
    engine = _engine(max_num_seqs=3, max_num_batched_tokens=64)
    prompts = [[TOKENIZER.bos_token_id] + [300 + i] * (20 + 13 * i) for i in range(7)]
    outputs = engine.generate(prompts, [SamplingParams(max_tokens=4)] * 7)
    stats = engine.stats
    assert stats.requests_per_call == [7] and len(outputs) == 7
    assert all(s.num_reqs <= 3 and s.num_tokens <= 64 for s in stats.steps)
    # The limits bind: some step is full in requests, some in tokens (chunked prefill).
    assert max(s.num_reqs for s in stats.steps) == 3
    assert max(s.num_tokens for s in stats.steps) == 64
    assert all(len(o.token_ids) <= 4 for o in outputs)
    assert stats.num_generated_tokens == sum(len(o.token_ids) for o in outputs)
    assert not engine.scheduler.has_unfinished_requests()
    pool = engine.scheduler.kv_cache_manager.block_pool
    assert pool.get_num_free_blocks() == 255  # every block back (block 0 is the null block)


@pytest.mark.parametrize(
    ("script", "text", "finish_reason", "stop_reason"),
    [
        (" the answer is 42\n\nQuestion: next", " the answer is 42\n\n", "stop", "Question:"),
        (" the answer is 42", " the answer is 42", "stop", "EOS"),
        (" the answer is 42 and then" * 4, None, "length", None),
    ],
    ids=["stop-string", "eos", "max-tokens"],
)
def test_stop_strings_eos_and_max_tokens(
    script: str, text: str | None, finish_reason: str, stop_reason: str | None
) -> None:
    engine = _engine()
    ids = TOKENIZER.encode(script, add_bos=False)
    rig(engine.runner, scripted(lambda prompt: ids, fallback=TOKENIZER.eos_token_id))
    params = SamplingParams(max_tokens=20, stop=("Question:", "</s>"))
    (output,) = engine.generate([TOKENIZER.encode("Q")], [params])
    assert output.finish_reason == finish_reason
    if finish_reason == "length":
        assert len(output.token_ids) == 20 and output.text == TOKENIZER.decode(ids[:20])
    else:
        assert output.text == text
    expected = TOKENIZER.eos_token_id if stop_reason == "EOS" else stop_reason
    assert output.stop_reason == expected
    if stop_reason == "EOS":
        assert output.token_ids[-1] == TOKENIZER.eos_token_id  # kept in the ids, not the text
    assert engine.scheduler.kv_cache_manager.block_pool.get_num_free_blocks() == 255


def test_a_stopped_request_leaves_the_batch_while_others_continue() -> None:
    engine = _engine()
    short = TOKENIZER.encode(" 42\n\nQuestion:", add_bos=False)
    long = TOKENIZER.encode(" the answer is 42 and then" * 4, add_bos=False)
    rig(engine.runner, scripted(lambda p: short if p[-1] == 300 else long, fallback=300))
    prompts = [[TOKENIZER.bos_token_id, 300], [TOKENIZER.bos_token_id, 301]]
    stopped, running = engine.generate(prompts, [SamplingParams(20, ("Question:",))] * 2)
    assert stopped.text == " 42\n\n" and stopped.finish_reason == "stop"
    assert running.finish_reason == "length" and len(running.token_ids) == 20
    assert [s.num_reqs for s in engine.stats.steps[-3:]] == [1, 1, 1]


def test_greedy_tokens_score_as_greedy_and_memory_is_tracked() -> None:
    engine = _engine(track_memory=True)
    assert engine.tracker is not None
    tracker = engine.tracker
    prompt = TOKENIZER.encode("the answer is")
    (output,) = engine.generate([prompt], [SamplingParams(max_tokens=3)])
    # The paged engine's greedy continuation is the dense forward's argmax too.
    logprob, greedy = engine.score(prompt + output.token_ids, len(output.token_ids))
    assert greedy and logprob < 0
    report = engine.memory_report()
    assert report.device == "cpu" and report.peak_bytes == tracker.ledger.peak_bytes > 0
    assert report.oom is None and report.top_sites
    assert any("kv_caches" in site.line_text for site in report.top_sites)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_the_memory_report_counts_allocations_made_in_other_threads() -> None:
    """``harness-ref`` (what ``eval gsm8k`` runs): a builder's KV cache copy in a worker thread
    is in the CPU memory report; on ``meta`` it runs out of memory as on the main thread."""
    from harness.eval.lm import HarnessRefLM
    from harness.eval.simulated import EngineOutOfMemoryError
    from suites.simulation.variants import ThreadedOOMBackend

    lm = HarnessRefLM(pretrained="tiny", backend=ThreadedOOMBackend, quiet=True, num_gpu_blocks=256)
    lm.engine.generate([[1, 2, 3]], [SamplingParams(max_tokens=2)])
    sites = lm.engine.memory_report().top_sites
    assert any(s.source and s.source.startswith("suites/simulation/variants.py:") for s in sites)
    meta = HarnessRefLM(
        pretrained="llama-3.1-8b", device="meta:h100-95", backend=ThreadedOOMBackend
    )
    with pytest.raises(EngineOutOfMemoryError, match=r"Tried to allocate 2\.12 GiB"):
        meta.engine.generate([[1] * 900] * 4, [SamplingParams(max_tokens=8)] * 4)
