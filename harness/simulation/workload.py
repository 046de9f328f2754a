"""Request workloads for the memory simulation; the main one is gsm8k as ``lm_eval`` sends it to vLLM.

No dataset may be downloaded, so gsm8k's request lengths are drawn (seeded) from a distribution
derived from published statistics (``docs/simulation.md``). :data:`GSM8K_SCHEDULER_LIMITS` are
vLLM 0.9.0's ``LLM``-class defaults on a large GPU; :func:`engine_config` is the ``VllmConfig`` a
workload runs under.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from harness.errors import HarnessError
from harness.reference.config import (
    CacheConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
    get_model_config,
    llm_class_scheduler_config,
)

GSM8K_TEST_SIZE = 1319
"""Examples in gsm8k's test split: one request each."""
NUM_FEWSHOT = 5
MAX_GEN_TOKS = 256
"""lm-eval's default ``max_gen_toks`` for ``generate_until`` tasks."""

TRAIN_CHARS_PER_EXAMPLE = 3_963_202 / 7_473 - 8
TEST_CHARS_PER_EXAMPLE = 713_732 / 1_319 - 8
QUESTION_CHAR_SHARE = 0.472
QUESTION_CHARS_PER_TOKEN = 4.25 / 1.08
ANSWER_CHARS_PER_TOKEN = 2.85 / 1.08
QUESTION_CV = 0.43
ANSWER_CV = 0.44
QUESTION_CHAR_RANGE = (42, 985)
ANSWER_CHAR_RANGE = (50, 1230)
RUNAWAY_FRACTION = 0.01
"""Share of requests that never produce the stop string and generate ``MAX_GEN_TOKS`` tokens."""

# Template tokens: "Question", ":" (the space joins the first word), "\n", "Answer", ":" (the
# space joins the answer) and the "\n\n" delimiter after each shot; the query has no delimiter.
SHOT_TEMPLATE_TOKENS = 6
QUERY_TEMPLATE_TOKENS = 5
BOS_TOKENS = 1
STOP_TOKENS = 3
"""``"\\n\\n"``, ``"Question"``, ``":"``: generated before the stop string matches."""


GSM8K_SCHEDULER_LIMITS = llm_class_scheduler_config(large_gpu=True, max_model_len=131072)


@dataclass(frozen=True, slots=True)
class WorkloadRequest:
    """One request: prompt length and the number of tokens generated before it stops."""

    request_id: str
    prompt_len: int
    output_len: int


@dataclass(frozen=True, slots=True)
class Workload:
    """Requests submitted together at step 0, and the engine limits they run under."""

    name: str
    requests: tuple[WorkloadRequest, ...]
    limits: SchedulerConfig


def _lognormal_tokens(
    rng: random.Random, mean_chars: float, cv: float, chars_range: tuple[int, int], cpt: float
) -> int:
    sigma = math.sqrt(math.log1p(cv * cv))
    mu = math.log(mean_chars) - sigma * sigma / 2
    chars = min(max(rng.lognormvariate(mu, sigma), chars_range[0]), chars_range[1])
    return max(1, round(chars / cpt))


def _question_tokens(rng: random.Random, chars_per_example: float) -> int:
    mean = chars_per_example * QUESTION_CHAR_SHARE
    return _lognormal_tokens(rng, mean, QUESTION_CV, QUESTION_CHAR_RANGE, QUESTION_CHARS_PER_TOKEN)


def _answer_tokens(rng: random.Random, chars_per_example: float) -> int:
    mean = chars_per_example * (1 - QUESTION_CHAR_SHARE)
    return _lognormal_tokens(rng, mean, ANSWER_CV, ANSWER_CHAR_RANGE, ANSWER_CHARS_PER_TOKEN)


def gsm8k(seed: int = 1234, num_requests: int = GSM8K_TEST_SIZE) -> Workload:
    """The gsm8k 5-shot workload: ``num_requests`` requests drawn as the module docstring derives."""
    if num_requests <= 0:
        raise HarnessError(f"num_requests must be positive, got {num_requests}")
    rng = random.Random(seed)
    requests: list[WorkloadRequest] = []
    for i in range(num_requests):
        shots = sum(
            _question_tokens(rng, TRAIN_CHARS_PER_EXAMPLE)
            + _answer_tokens(rng, TRAIN_CHARS_PER_EXAMPLE)
            + SHOT_TEMPLATE_TOKENS
            for _ in range(NUM_FEWSHOT)
        )
        query = _question_tokens(rng, TEST_CHARS_PER_EXAMPLE) + QUERY_TEMPLATE_TOKENS
        reference_answer = _answer_tokens(rng, TEST_CHARS_PER_EXAMPLE)
        runaway = rng.random() < RUNAWAY_FRACTION
        output_len = MAX_GEN_TOKS if runaway else min(reference_answer + STOP_TOKENS, MAX_GEN_TOKS)
        requests.append(
            WorkloadRequest(
                request_id=f"gsm8k-{i}",
                prompt_len=BOS_TOKENS + shots + query,
                output_len=output_len,
            )
        )
    return Workload(name="gsm8k", requests=tuple(requests), limits=GSM8K_SCHEDULER_LIMITS)


def tiny(seed: int = 0, num_requests: int = 12) -> Workload:
    """A handful of short requests for the ``tiny`` models (``max_model_len`` 256)."""
    rng = random.Random(seed)
    requests = tuple(
        WorkloadRequest(
            request_id=f"tiny-{i}", prompt_len=rng.randint(5, 60), output_len=rng.randint(1, 24)
        )
        for i in range(num_requests)
    )
    limits = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=64, max_model_len=256)
    return Workload(name="tiny", requests=requests, limits=limits)


WORKLOADS: dict[str, Callable[[], Workload]] = {"gsm8k": gsm8k, "tiny": tiny}
"""Named workloads (a plain dict: no registration by import side effect)."""


def get_workload(name: str) -> Workload:
    """The workload called ``name``; an unknown name lists the available ones."""
    try:
        factory = WORKLOADS[name]
    except KeyError:
        raise HarnessError(
            f"unknown workload {name!r}; available: {', '.join(sorted(WORKLOADS))}"
        ) from None
    return factory()


DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's ``CacheConfig.gpu_memory_utilization`` default (lm-eval's ``vllm`` model passes 0.9 too)."""


def engine_config(
    model: str | ModelConfig,
    workload: Workload,
    *,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    dtype: torch.dtype | None = None,
) -> VllmConfig:
    """The ``VllmConfig`` that runs ``workload`` on ``model``; ``dtype`` replaces the preset's."""
    model_config = get_model_config(model) if isinstance(model, str) else model
    max_model_len = min(workload.limits.max_model_len, model_config.max_model_len)
    model_config = replace(
        model_config, max_model_len=max_model_len, dtype=dtype or model_config.dtype
    )
    return VllmConfig(
        model_config=model_config,
        cache_config=CacheConfig(gpu_memory_utilization=gpu_memory_utilization),
        scheduler_config=replace(workload.limits, max_model_len=max_model_len),
    )
