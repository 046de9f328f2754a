"""The CPU engine behind ``harness-ref``: vLLM's ``LLM.generate`` loop over the reference engine.

:class:`ReferenceEngine` runs :mod:`harness.reference.engine` on the CPU with real weights and
greedy sampling. Stopping follows vLLM 0.9.0 V1: EOS finishes a request (kept in ``token_ids``,
not in the text), a stop string aborts it and cuts the text. With ``track_memory`` every CPU
allocation goes to a ledger, one region per step.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from harness.eval.report import MemoryReport
from harness.eval.tokenizer import Tokenizer
from harness.memory.ledger import Ledger
from harness.reference.backends.abstract import AttentionBackend
from harness.reference.config import VllmConfig
from harness.reference.engine import EngineStep, memory_tracker, start_engine, tracking
from harness.reference.scheduler import Request, RequestStatus


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Greedy decoding limits of one request (the fields of vLLM's ``SamplingParams`` lm-eval sets)."""

    max_tokens: int
    stop: tuple[str, ...] = ()
    """Stop strings; the output text ends before the first one generated."""


@dataclass(slots=True)
class CompletionOutput:
    """What one request generated (vLLM's ``CompletionOutput``)."""

    text: str
    token_ids: list[int]
    finish_reason: str
    """``"stop"`` (EOS or a stop string) or ``"length"`` (``max_tokens`` or ``max_model_len``)."""
    stop_reason: str | int | None = None
    """The stop string that matched, the EOS id, or ``None``."""


@dataclass
class StepShape:
    """One engine step: how many requests and tokens the scheduler batched."""

    num_reqs: int
    num_tokens: int


@dataclass
class EngineStats:
    """Counts over every ``generate`` call of one engine."""

    num_generate_calls: int = 0
    requests_per_call: list[int] = field(default_factory=list[int])
    num_requests: int = 0
    num_steps: int = 0
    num_preemptions: int = 0
    num_prompt_tokens: int = 0
    num_generated_tokens: int = 0
    generate_time_s: float = 0.0
    """Wall time spent inside ``generate``."""
    steps: list[StepShape] = field(default_factory=list[StepShape])

    @property
    def tokens_per_s(self) -> float:
        """Prompt and generated tokens processed per second of ``generate`` time."""
        total = self.num_prompt_tokens + self.num_generated_tokens
        return total / self.generate_time_s if self.generate_time_s > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "steps": self.num_steps,
            "num_requests": self.num_requests,
            "num_preemptions": self.num_preemptions,
            "num_generate_calls": self.num_generate_calls,
            "num_prompt_tokens": self.num_prompt_tokens,
            "num_generated_tokens": self.num_generated_tokens,
            "max_step_reqs": max((s.num_reqs for s in self.steps), default=0),
            "max_step_tokens": max((s.num_tokens for s in self.steps), default=0),
            "generate_time_s": round(self.generate_time_s, 3),
            "tokens_per_s": round(self.tokens_per_s, 1),
        }


@dataclass
class _Tracked:
    """One request in flight: its scheduler request, limits, and text so far."""

    request: Request
    params: SamplingParams
    num_seen: int = 0
    data: bytearray = field(default_factory=bytearray)
    """UTF-8 bytes of the tokens seen so far (up to EOS)."""
    text: str = ""
    output: CompletionOutput | None = None

    def is_finished(self) -> bool:
        return self.output is not None


class ReferenceEngine:
    """Greedy generation through the reference scheduler and runner on the CPU."""

    def __init__(
        self,
        vllm_config: VllmConfig,
        tokenizer: Tokenizer,
        *,
        backend: type[AttentionBackend],
        num_gpu_blocks: int,
        seed: int = 0,
        track_memory: bool = False,
    ) -> None:
        if tokenizer.vocab_size > vllm_config.model_config.vocab_size:
            raise ValueError(
                f"the tokenizer has {tokenizer.vocab_size} tokens but the model only "
                f"{vllm_config.model_config.vocab_size}"
            )
        self.vllm_config = vllm_config
        self.tokenizer = tokenizer
        self.max_model_len = vllm_config.model_config.max_model_len
        self.tracker = memory_tracker(Ledger(), "cpu") if track_memory else None
        self.stats = EngineStats()
        self._ids = itertools.count()
        with tracking(self.tracker):
            self.engine = start_engine(
                vllm_config, backend, num_gpu_blocks, seed=seed, wrap_step=self._region
            )
        self.runner = self.engine.runner
        self.scheduler = self.engine.scheduler

    def _region(self, step: int) -> contextlib.AbstractContextManager[object]:
        if self.tracker is None:
            return contextlib.nullcontext()
        return self.tracker.ledger.region(f"step {step}")

    def generate(
        self,
        prompts: Sequence[list[int]],
        params: Sequence[SamplingParams],
        *,
        use_tqdm: bool = False,
    ) -> list[CompletionOutput]:
        """Run every prompt to completion together; outputs in the order of ``prompts``."""
        if len(prompts) != len(params):
            raise ValueError("one SamplingParams per prompt")
        started = time.perf_counter()
        stats = self.stats
        stats.num_generate_calls += 1
        stats.requests_per_call.append(len(prompts))
        tracked: dict[str, _Tracked] = {}
        for prompt, p in zip(prompts, params, strict=True):
            request = Request(f"req-{next(self._ids)}", list(prompt), p.max_tokens)
            self.scheduler.add_request(request)
            tracked[request.request_id] = _Tracked(request, p)
            stats.num_prompt_tokens += len(prompt)
        stats.num_requests += len(prompts)
        preemptions_before = self.scheduler.num_preemptions
        progress = _progress(len(prompts), use_tqdm)
        with tracking(self.tracker), progress as bar:
            self.engine.run(lambda step: self._detokenize_step(step, tracked, bar))
        stats.num_preemptions += self.scheduler.num_preemptions - preemptions_before
        stats.generate_time_s += time.perf_counter() - started
        outputs = [t.output for t in tracked.values()]
        assert all(o is not None for o in outputs)
        return [o for o in outputs if o is not None]

    def score(self, tokens: list[int], num_continuation: int) -> tuple[float, bool]:
        """Log-likelihood of the last ``num_continuation`` tokens given the ones before, and
        whether greedy decoding would produce them; from one dense forward (no KV cache)."""
        if not 0 < num_continuation < len(tokens):
            raise ValueError("the continuation must be non-empty and follow a non-empty context")
        model = self.runner.model
        with tracking(self.tracker):
            inputs = torch.tensor(tokens[:-1], dtype=torch.int64)
            logits = model.compute_logits(model.dense_forward(inputs)[-num_continuation:])
            logprobs = torch.log_softmax(logits, dim=-1)
            target = torch.tensor(tokens[-num_continuation:], dtype=torch.int64)
            total = float(logprobs.gather(1, target.unsqueeze(1)).sum())
            greedy = bool((logprobs.argmax(dim=-1) == target).all())
        return total, greedy

    def memory_report(self) -> MemoryReport:
        """Peak CPU memory and its sites (needs a tracker; without one, an empty report)."""
        if self.tracker is None:
            return MemoryReport("cpu", 0, [], None, "cpu: memory was not tracked")
        return MemoryReport.from_ledger(self.tracker.ledger)

    def _detokenize_step(self, step: EngineStep, tracked: dict[str, _Tracked], bar: _Bar) -> None:
        scheduler, stats, scheduler_output = self.scheduler, self.stats, step.scheduler_output
        stats.num_steps += 1
        stats.steps.append(
            StepShape(
                len(scheduler_output.num_scheduled_tokens),
                scheduler_output.total_num_scheduled_tokens,
            )
        )
        stopped: list[str] = []
        for req_id in scheduler_output.num_scheduled_tokens:
            state = tracked.get(req_id)
            if state is None or state.is_finished():
                continue
            if self._detokenize(state):
                stopped.append(req_id)
            if state.is_finished():
                bar.update(1)
        scheduler.finish_requests(stopped, RequestStatus.FINISHED_ABORTED)

    def _detokenize(self, state: _Tracked) -> bool:
        """Take the request's new tokens; True when EOS or a stop string ended it."""
        request = state.request
        tokens = request.output_token_ids
        new = tokens[state.num_seen :]
        if not new:
            return False
        self.stats.num_generated_tokens += len(new)
        state.num_seen = len(tokens)
        previous = len(state.text)
        eos = self.tokenizer.eos_token_id
        end = tokens.index(eos) if eos in new else None
        for token in new if end is None else tokens[len(tokens) - len(new) : end]:
            state.data += self.tokenizer.token_bytes(token)
        state.text = state.data.decode("utf-8", errors="replace")
        cut = _cut_at_stop(state.text, state.params.stop, since=previous)
        if cut is not None:
            text, stop = cut
            kept = tokens if end is None else tokens[: end + 1]
            state.output = CompletionOutput(text, list(kept), "stop", stop)
            return True
        if end is not None:  # vLLM's scheduler stops on EOS; the EOS text is not output
            state.output = CompletionOutput(state.text, list(tokens[: end + 1]), "stop", eos)
            return True
        if request.is_finished:
            state.output = CompletionOutput(state.text, list(tokens), "length")
        return False


def _cut_at_stop(text: str, stop: Sequence[str], *, since: int) -> tuple[str, str] | None:
    """``(text before the stop string, the stop string)`` for the first of ``stop`` (in order) that
    occurs in ``text`` ending after position ``since``, as vLLM's ``check_stop_strings``."""
    for stop_str in stop:
        if not stop_str:
            continue
        index = text.find(stop_str, max(0, since - len(stop_str) + 1))
        if index != -1:
            return text[:index], stop_str
    return None


class _Bar(Protocol):
    def update(self, n: int = 1) -> object: ...


class _NoBar:
    def update(self, n: int = 1) -> object:
        return None


def _progress(total: int, enabled: bool) -> contextlib.AbstractContextManager[_Bar]:
    """A tqdm bar over finished requests (vLLM's "Processed prompts"), or nothing."""
    if not enabled:
        return contextlib.nullcontext(_NoBar())
    from tqdm import tqdm

    bar: contextlib.AbstractContextManager[_Bar] = tqdm(
        total=total, desc="Processed prompts", unit="req"
    )
    return bar
