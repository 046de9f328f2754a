"""The meta-device engine behind ``harness-ref``: lm-eval's requests on a simulated GPU.

:class:`SimulatedEngine` runs each ``generate`` call through
:func:`harness.memory.simulate.simulate`, the machinery of ``harness memory simulate``: the
model's full shape on the ``meta`` device, the KV cache sized as vLLM sizes it on the device
profile, then the reference scheduler and runner step by step with every allocation checked
against the device's capacity. The prompts are lm-eval's own (their token counts come from the
run's tokenizer); batching and scheduling are the engine's.

``meta`` tensors hold no values, so nothing can be sampled. How long each request generates comes
from a seeded **length model** instead (:func:`output_length`): greedy decoding of a gsm8k 5-shot
prompt continues the pattern, a worked answer as long as a gsm8k answer and then the start of the
next ``"\\n\\nQuestion:"``, which the ``until`` stop string ends. So the length is a gsm8k answer
length drawn as :mod:`harness.memory.workload` derives it (log-normal characters, Llama 3
characters per token) plus the 3 tokens before the stop string matches, and with probability
:data:`~harness.memory.workload.RUNAWAY_FRACTION` the request never stops and runs to its
``max_tokens``. The draw is seeded by the run's seed and a hash of the prompt's token ids, so a
request gets the same length whatever else is in the batch. A request that stops on a stop string
frees its blocks exactly as one that reaches ``max_tokens``, so each request is simulated with
``max_tokens`` equal to its drawn length. The texts returned are empty.

Engine limits default to vLLM 0.9.0's for the ``LLM`` class (:func:`vllm_default_limits`).
An out-of-memory error ends the run (:class:`EngineOutOfMemoryError`), as it ends vLLM's.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from harness.eval.engine import CompletionOutput, EngineStats, SamplingParams, StepShape
from harness.eval.report import MemoryReport
from harness.memory.devices import DeviceProfile
from harness.memory.simulate import SimulationResult, simulate
from harness.memory.sizes import GiB
from harness.memory.workload import (
    ANSWER_CHAR_RANGE,
    ANSWER_CHARS_PER_TOKEN,
    ANSWER_CV,
    QUESTION_CHAR_SHARE,
    RUNAWAY_FRACTION,
    STOP_TOKENS,
    TEST_CHARS_PER_EXAMPLE,
    SchedulerLimits,
    Workload,
    WorkloadRequest,
)
from harness.reference.backends.abstract import AttentionBackend
from harness.reference.backends.flashinfer import FlashInferBackend


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """vLLM's scheduler limits for one device."""

    max_num_seqs: int
    max_num_batched_tokens: int


def vllm_default_limits(profile: DeviceProfile) -> EngineLimits:
    """vLLM 0.9.0 ``EngineArgs._set_default_args_v1`` for ``UsageContext.LLM_CLASS`` (what
    lm-eval's ``vllm`` model creates): 16384 tokens and 1024 sequences on devices with at least
    70 GiB that are not A100s, else 8192 and 256."""
    if profile.total_memory >= 70 * GiB and "a100" not in profile.name.lower():
        return EngineLimits(max_num_seqs=1024, max_num_batched_tokens=16384)
    return EngineLimits(max_num_seqs=256, max_num_batched_tokens=8192)


def output_length(prompt: Sequence[int], max_tokens: int, seed: int) -> int:
    """Tokens a greedy model generates for ``prompt`` before it stops (module docstring)."""
    digest = hashlib.blake2b(f"{seed}:{','.join(map(str, prompt))}".encode(), digest_size=8)
    rng = random.Random(int.from_bytes(digest.digest(), "little"))
    if rng.random() < RUNAWAY_FRACTION:
        return max_tokens
    mean = TEST_CHARS_PER_EXAMPLE * (1 - QUESTION_CHAR_SHARE)
    sigma = math.sqrt(math.log1p(ANSWER_CV * ANSWER_CV))
    chars = rng.lognormvariate(math.log(mean) - sigma * sigma / 2, sigma)
    chars = min(max(chars, ANSWER_CHAR_RANGE[0]), ANSWER_CHAR_RANGE[1])
    return max(1, min(round(chars / ANSWER_CHARS_PER_TOKEN) + STOP_TOKENS, max_tokens))


class EngineOutOfMemoryError(Exception):
    """The simulated device ran out of memory during ``generate`` (the run ends, as vLLM's does)."""

    def __init__(self, result: SimulationResult) -> None:
        assert result.oom is not None
        self.result = result
        super().__init__(str(result.oom))


class SimulatedEngine:
    """``generate`` on a simulated GPU: lengths from the length model, memory from the simulation."""

    def __init__(
        self,
        *,
        model: str,
        device: str,
        regression: str | None,
        backend: type[AttentionBackend],
        max_num_seqs: int,
        max_num_batched_tokens: int,
        max_model_len: int,
        gpu_memory_utilization: float = 0.9,
        seed: int = 0,
    ) -> None:
        self.model = model
        self.backend = backend
        self.device = device
        self.regression = regression
        self.limits = SchedulerLimits(max_num_seqs, max_num_batched_tokens, max_model_len)
        self.max_model_len = max_model_len
        self.gpu_memory_utilization = gpu_memory_utilization
        self.seed = seed
        self.stats = EngineStats()
        self.results: list[SimulationResult] = []

    def generate(
        self,
        prompts: Sequence[list[int]],
        params: Sequence[SamplingParams],
        *,
        use_tqdm: bool = False,
    ) -> list[CompletionOutput]:
        """Simulate every prompt together; empty texts of the drawn lengths."""
        del use_tqdm
        lengths = [
            output_length(prompt, p.max_tokens, self.seed)
            for prompt, p in zip(prompts, params, strict=True)
        ]
        first = self.stats.num_requests
        workload = Workload(
            name="gsm8k (lm-eval requests)",
            requests=tuple(
                WorkloadRequest(f"req-{first + i}", len(prompt), length)
                for i, (prompt, length) in enumerate(zip(prompts, lengths, strict=True))
            ),
            limits=self.limits,
        )
        result = simulate(
            model=self.model,
            device=self.device,
            workload=workload,
            # The reference FlashInfer backend is simulate's default (and unlabelled there).
            backend=None if self.backend is FlashInferBackend else self.backend,
            regression=self.regression,
            gpu_memory_utilization=self.gpu_memory_utilization,
        )
        self.results.append(result)
        stats = self.stats
        stats.num_generate_calls += 1
        stats.requests_per_call.append(len(prompts))
        stats.num_requests += len(prompts)
        stats.num_steps += len(result.steps)
        stats.steps.extend(StepShape(s.num_reqs, s.num_tokens) for s in result.steps)
        stats.num_preemptions += result.num_preemptions
        stats.generate_time_s += result.wall_time_s
        if result.oom is not None:  # what was processed before the error is not counted
            raise EngineOutOfMemoryError(result)
        stats.num_prompt_tokens += sum(len(p) for p in prompts)
        stats.num_generated_tokens += sum(lengths)
        return [
            CompletionOutput("", [0] * n, "length" if n == p.max_tokens else "stop")
            for n, p in zip(lengths, params, strict=True)
        ]

    def memory_report(self) -> MemoryReport:
        """The run with the highest peak (or the one that ran out of memory)."""
        return MemoryReport.from_simulations(f"meta:{self.device}", self.results)
