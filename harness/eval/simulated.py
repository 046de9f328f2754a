"""The meta-device engine behind ``harness-ref``: lm-eval's requests on a simulated GPU.

:class:`SimulatedEngine` runs each ``generate`` call through
:func:`harness.simulation.simulate.simulate`. ``meta`` tensors hold no values, so output lengths
come from a seeded length model (:func:`output_length`) and the texts are empty. Limits default
to vLLM 0.9.0's ``LLM`` class (:func:`vllm_default_limits`); an out-of-memory error ends the run.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.eval.engine import CompletionOutput, EngineStats, SamplingParams, StepShape
from harness.eval.report import MemoryReport
from harness.memory.devices import DeviceProfile
from harness.memory.sizes import GiB
from harness.reference.backends.abstract import AttentionBackend
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.reference.config import SchedulerConfig, llm_class_scheduler_config
from harness.simulation.simulate import SimulationResult, simulate
from harness.simulation.workload import (
    ANSWER_CHAR_RANGE,
    ANSWER_CHARS_PER_TOKEN,
    ANSWER_CV,
    QUESTION_CHAR_SHARE,
    RUNAWAY_FRACTION,
    STOP_TOKENS,
    TEST_CHARS_PER_EXAMPLE,
    Workload,
    WorkloadRequest,
)


def vllm_default_limits(profile: DeviceProfile, max_model_len: int) -> SchedulerConfig:
    """vLLM 0.9.0's ``LLM``-class limits on ``profile`` (:func:`llm_class_scheduler_config`)."""
    large = profile.total_memory >= 70 * GiB and "a100" not in profile.name.lower()
    return llm_class_scheduler_config(large_gpu=large, max_model_len=max_model_len)


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


@dataclass(kw_only=True)
class SimulatedEngine:
    """``generate`` on a simulated GPU: lengths from the length model, memory from the simulation."""

    model: str
    device: str
    regression: str | None
    backend: type[AttentionBackend]
    limits: SchedulerConfig
    gpu_memory_utilization: float = 0.9
    seed: int = 0
    stats: EngineStats = field(default_factory=EngineStats)
    results: list[SimulationResult] = field(default_factory=list[SimulationResult])

    @property
    def max_model_len(self) -> int:
        return self.limits.max_model_len

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
