"""A generated serving sequence: the scheduler's decisions, step by step, replayable from a seed.

Requests shaped like gsm8k's 5-shot prompts (:func:`harness.simulation.workload.gsm8k`, lengths
scaled down by :attr:`SequenceSpec.length_scale` so a CPU runs hundreds of steps) arrive over
time; the reference scheduler (vLLM 0.9.0's policy) chunks their prefills to the token budget,
decodes them, preempts the newest when its pool of blocks runs out and finishes them at their
output length. Every :class:`~harness.reference.outputs.SchedulerOutput` is kept: the sequence
is what both sides of a comparison replay, whatever their builders do, since vLLM's scheduler
never asks the attention backend anything.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from types import SimpleNamespace
from typing import cast

import torch

from harness.errors import HarnessError
from harness.reference.config import SchedulerConfig
from harness.reference.engine import Engine
from harness.reference.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheTensor,
)
from harness.reference.outputs import ModelRunnerOutput, SchedulerOutput
from harness.reference.runner import ModelRunner
from harness.reference.scheduler import Request
from harness.simulation.workload import gsm8k


@dataclass(frozen=True, slots=True)
class SequenceSpec:
    """How a serving sequence is generated (every field has the default ``harness`` uses)."""

    seed: int = 0
    num_steps: int = 200
    block_size: int = 16
    pool_tokens: int = 1024
    """Tokens in the scheduler's pool of blocks: few enough that long prompts force
    preemptions (``pool_tokens // block_size`` blocks)."""
    max_num_seqs: int = 8
    max_num_batched_tokens: int = 96
    """The per-step token budget: prompts longer than it are prefilled in chunks."""
    max_request_len: int = 512
    """No request grows past this many tokens (prompt and output)."""
    length_scale: float = 0.125
    """gsm8k's prompt and output lengths are multiplied by this (at least one token each)."""
    arrival_rate: float = 0.5
    """Mean new requests per step (Bernoulli per step, seeded), after a first batch of four."""

    def __post_init__(self) -> None:
        if self.num_steps <= 0 or self.block_size <= 0:
            raise HarnessError("a serving sequence needs positive num_steps and block_size")
        if self.num_blocks * self.block_size < self.max_request_len:
            raise HarnessError(
                f"a pool of {self.pool_tokens} tokens cannot hold one request of "
                f"{self.max_request_len} tokens"
            )

    @property
    def num_blocks(self) -> int:
        """Blocks in the scheduler's pool; every block id is below this."""
        return self.pool_tokens // self.block_size


@dataclass(frozen=True, slots=True)
class ServingSequence:
    """The scheduler outputs of every step (steps that scheduled nothing are left out)."""

    spec: SequenceSpec
    steps: tuple[SchedulerOutput, ...]
    num_preemptions: int
    num_finished: int


def _requests(spec: SequenceSpec) -> list[Request]:
    workload = gsm8k(seed=1234 + spec.seed, num_requests=4 + spec.num_steps)
    limit = spec.max_request_len
    requests: list[Request] = []
    for i, w in enumerate(workload.requests):
        prompt_len = min(max(1, round(w.prompt_len * spec.length_scale)), limit - 1)
        output_len = min(max(1, round(w.output_len * spec.length_scale)), limit - prompt_len)
        prompt = [(7 * i + j) % 1000 + 1 for j in range(prompt_len)]
        requests.append(Request(f"req-{i}", prompt, max_tokens=output_len))
    return requests


class _SamplingRunner:
    """The engine's runner for generating a sequence: no model, one token sampled for each
    request whose prompt is complete after the step (what a model runner returns)."""

    def __init__(self, spec: SequenceSpec) -> None:
        kv_spec = FullAttentionSpec(spec.block_size, 1, 1, torch.float16, False)
        self.kv_cache_config = KVCacheConfig(
            num_blocks=spec.num_blocks,
            tensors={"layer": KVCacheTensor(kv_spec.page_size_bytes * spec.num_blocks)},
            kv_cache_groups=[KVCacheGroupSpec(["layer"], kv_spec)],
        )
        limits = SchedulerConfig(
            max_num_seqs=spec.max_num_seqs,
            max_num_batched_tokens=spec.max_num_batched_tokens,
            max_model_len=spec.max_request_len,
        )
        self.vllm_config = SimpleNamespace(scheduler_config=limits)
        self.num_tokens: dict[str, int] = {}
        """Request -> prompt and sampled tokens the runner knows."""

    def execute_model(self, output: SchedulerOutput, trace: bool = False) -> ModelRunnerOutput:
        del trace
        for req_id in output.finished_req_ids:
            self.num_tokens.pop(req_id, None)
        computed: dict[str, int] = {}
        for new in output.scheduled_new_reqs:
            self.num_tokens[new.req_id] = len(new.prompt_token_ids)
            computed[new.req_id] = new.num_computed_tokens
        for cached in output.scheduled_cached_reqs:
            computed[cached.req_id] = cached.num_computed_tokens
        req_ids = list(output.num_scheduled_tokens)
        sampled: list[list[int]] = []
        for req_id in req_ids:
            done = computed[req_id] + output.num_scheduled_tokens[req_id]
            if done >= self.num_tokens[req_id]:
                sampled.append([(self.num_tokens[req_id] * 31) % 1000 + 1])
                self.num_tokens[req_id] += 1
            else:
                sampled.append([])
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={r: i for i, r in enumerate(req_ids)},
            sampled_token_ids=sampled,
        )


def generate_sequence(spec: SequenceSpec) -> ServingSequence:
    """The scheduler outputs of ``spec.num_steps`` steps (module docstring), stepped by the
    reference's one engine loop (:class:`~harness.reference.engine.Engine`)."""
    rng = random.Random(spec.seed)
    pending = _requests(spec)
    engine = Engine(cast("ModelRunner", _SamplingRunner(spec)))
    engine.add_requests(pending.pop(0) for _ in range(4))
    steps: list[SchedulerOutput] = []
    num_finished = 0
    while len(steps) < spec.num_steps and (pending or engine.has_unfinished_requests()):
        if pending and rng.random() < spec.arrival_rate:
            engine.add_requests([pending.pop(0)])
        step = engine.step()
        num_finished += len(step.scheduler_output.finished_req_ids)
        if step.scheduler_output.total_num_scheduled_tokens:
            steps.append(copy.deepcopy(step.scheduler_output))
    return ServingSequence(spec, tuple(steps), engine.scheduler.num_preemptions, num_finished)
