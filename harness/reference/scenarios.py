"""Named scenarios: small models and fixed requests driven through scheduler, runner and oracle.

Each step runs with ``trace=True``; its record summarises each group's block table rows, slot
mapping and metadata, and its hidden states must equal a dense forward of each whole sequence
within :data:`ORACLE_TOLERANCE`. The demo prints the records; the golden tests snapshot them
(metadata only, the same on every machine).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from harness.errors import HarnessError
from harness.reference.backends.abstract import AttentionBackend
from harness.reference.config import (
    CacheConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
    get_model_config,
    lookup,
)
from harness.reference.engine import Engine, start_engine
from harness.reference.model import LlamaForCausalLM
from harness.reference.outputs import CachedRequestData, NewRequestData, SchedulerOutput
from harness.reference.scheduler import Request
from harness.reference.step_trace import StepTrace

ORACLE_TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}
"""Paged vs dense final hidden states in float32. Each attention layer agrees to 1e-5
(``oracle.FP32_ATOL``); a few layers, norms and MLPs in between stay well inside 1e-4, while
a wrong slot, block or length moves them by O(1)."""

MAX_LISTED_ELEMENTS = 4096
"""Tensors up to this size are summarised by value; bigger ones (workspaces) by shape and dtype."""


@dataclass(frozen=True)
class ScenarioRequest:
    """One request: prompt length, tokens to generate, and the step at which it arrives."""

    prompt_len: int
    max_tokens: int
    arrival_step: int = 0


Script = Callable[[np.random.Generator, int], list[SchedulerOutput]]
"""Builds a scenario's scheduler outputs by hand (from a seeded generator and the vocab size)."""


@dataclass(frozen=True)
class Scenario:
    """A model, engine limits and requests; ``script`` replaces the scheduler when set."""

    name: str
    description: str
    model_config: ModelConfig
    requests: tuple[ScenarioRequest, ...] = ()
    backend: str = "FLASHINFER"
    block_size: int = 16
    num_gpu_blocks: int = 64
    max_num_seqs: int = 4
    max_num_batched_tokens: int = 32
    script: Script | None = None
    seed: int = 0
    disable_hybrid_kv_cache_manager: bool = True
    """vLLM 0.9.0's one unified KV cache group; False asks for a group per attention type."""

    @property
    def vllm_config(self) -> VllmConfig:
        return VllmConfig(
            model_config=self.model_config,
            cache_config=CacheConfig(block_size=self.block_size),
            scheduler_config=SchedulerConfig(
                max_num_seqs=self.max_num_seqs,
                max_num_batched_tokens=self.max_num_batched_tokens,
                max_model_len=self.model_config.max_model_len,
                disable_hybrid_kv_cache_manager=self.disable_hybrid_kv_cache_manager,
            ),
        )


@dataclass
class GroupRecord:
    """One KV cache group in one step."""

    group_id: int
    kv_cache_spec: str
    block_size: int
    layer_names: list[str]
    block_table: list[list[int]]
    """The batch's rows, each cut to its valid blocks."""
    slot_mapping: list[int]
    metadata: dict[str, object]
    """:func:`summarize_metadata` of the one object every layer of the group received."""


@dataclass
class StepRecord:
    """One engine step: the batch (in the order the runner ran it) and every group's view."""

    step: int
    req_ids: list[str]
    num_computed_tokens: list[int]
    num_scheduled_tokens: list[int]
    groups: list[GroupRecord]
    max_abs_err: float | None
    """Largest |paged - dense| over the step's hidden states (None when the model did not run)."""
    oracle_ok: bool


@dataclass
class ScenarioResult:
    """Every step of a scenario, and whether the oracle agreed on all of them."""

    scenario: Scenario
    steps: list[StepRecord] = field(default_factory=list[StepRecord])
    num_preemptions: int = 0

    @property
    def oracle_ok(self) -> bool:
        return all(step.oracle_ok for step in self.steps)

    @property
    def max_abs_err(self) -> float:
        return float(np.max([0.0, *(s.max_abs_err or 0.0 for s in self.steps)]))  # keeps NaN

    def golden_data(self) -> dict[str, object]:
        """Deterministic metadata for the golden file (no float errors, no sampled tokens)."""
        steps: list[object] = []
        for s in self.steps:
            record = dataclasses.asdict(s)
            del record["max_abs_err"], record["oracle_ok"]
            steps.append(record)
        hybrid_manager = not self.scenario.disable_hybrid_kv_cache_manager
        return {
            "scenario": self.scenario.name,
            "vllm_semantics": "0.9.0, KV cache groups per attention type as vLLM 0.9.1+"
            if hybrid_manager
            else "0.9.0",
            "backend": self.scenario.backend,
            "model": self.scenario.model_config.name,
            "num_preemptions": self.num_preemptions,
            "steps": steps,
        }


def summarize_value(value: object) -> object:
    """A JSON-friendly view: small tensors as lists, big ones as shape/dtype, dtypes as names."""
    if isinstance(value, torch.Tensor):
        if value.is_meta or value.numel() > MAX_LISTED_ELEMENTS:
            return {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
        cpu = value.detach().cpu()
        values: list[object] = (cpu.float() if cpu.is_floating_point() else cpu).numpy().tolist()
        return values
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return type(value).__name__


def summarize_metadata(metadata: object) -> dict[str, object]:
    """Every dataclass field of a metadata object, summarised with :func:`summarize_value`."""
    summary: dict[str, object] = {"type": type(metadata).__name__}
    if dataclasses.is_dataclass(metadata):
        for f in dataclasses.fields(metadata):
            summary[f.name] = summarize_value(getattr(metadata, f.name))
    return summary


def dense_check(model: LlamaForCausalLM, trace: StepTrace) -> float:
    """Max |paged - dense| of the traced step: ``model`` over each request's whole sequence so far,
    no KV cache, rows of this step's tokens. NaN when any difference is NaN.
    """
    hidden_states = trace.hidden_states
    if hidden_states is None:
        raise ValueError("dense_check needs a step executed with run_model=True")
    qsl = trace.query_start_loc
    errs = [0.0]
    for i, tokens in enumerate(trace.token_ids):
        token_ids = torch.as_tensor(tokens.astype(np.int64)).to(hidden_states.device)
        dense = model.dense_forward(token_ids)[trace.num_computed_tokens[i] :]
        paged = hidden_states[qsl[i] : qsl[i + 1]]
        errs.append(float((dense.float() - paged.float()).abs().max()))
    return float(np.max(errs))  # keeps a NaN (Python's max drops one that is not first)


def oracle_tolerance(trace: StepTrace) -> float:
    """:data:`ORACLE_TOLERANCE` for the traced step's hidden states (absolute + relative)."""
    hidden_states = trace.hidden_states
    assert hidden_states is not None
    scale = float(hidden_states.float().abs().max()) if hidden_states.numel() else 0.0
    return ORACLE_TOLERANCE["atol"] + ORACLE_TOLERANCE["rtol"] * scale


def record_step(trace: StepTrace, step: int, model: LlamaForCausalLM | None = None) -> StepRecord:
    """What the traced step did, per group; with ``model``, also the dense oracle's verdict."""
    groups = [
        GroupRecord(
            group_id=group.group_id,
            kv_cache_spec=type(group.kv_cache_spec).__name__,
            block_size=group.kv_cache_spec.block_size,
            layer_names=group.layer_names,
            block_table=group.block_table,
            slot_mapping=group.slot_mapping,
            metadata=summarize_metadata(group.metadata),
        )
        for group in trace.groups
    ]
    err = None if model is None else dense_check(model, trace)
    return StepRecord(
        step=step,
        req_ids=trace.req_ids,
        num_computed_tokens=trace.num_computed_tokens,
        num_scheduled_tokens=trace.num_scheduled_tokens,
        groups=groups,
        max_abs_err=err,
        oracle_ok=err is None or err <= oracle_tolerance(trace),
    )


def scenario_engine(
    scenario: Scenario, attn_backend: str | type[AttentionBackend] | None = None
) -> Engine:
    """A CPU engine for ``scenario``: profiled, ``num_gpu_blocks`` KV cache blocks, every step
    traced."""
    return start_engine(
        scenario.vllm_config,
        attn_backend or scenario.backend,
        scenario.num_gpu_blocks,
        seed=scenario.seed,
        profile=True,
        trace=True,
    )


def run_scenario(
    scenario: Scenario,
    attn_backend: str | type[AttentionBackend] | None = None,
    max_steps: int = 200,
) -> ScenarioResult:
    """Run ``scenario`` to completion on the CPU, recording and checking every step."""
    engine = scenario_engine(scenario, attn_backend)
    runner = engine.runner
    result = ScenarioResult(scenario)
    rng = np.random.default_rng(scenario.seed)
    vocab_size = scenario.model_config.vocab_size
    model = runner.get_model()
    if scenario.script is not None:
        for step, scheduler_output in enumerate(scenario.script(rng, vocab_size)):
            trace = runner.execute_model(scheduler_output, trace=True).trace
            assert trace is not None, "a scripted step schedules tokens"
            result.steps.append(record_step(trace, step, model))
        return result

    pending = sorted(enumerate(scenario.requests), key=lambda ir: ir[1].arrival_step)
    while pending or engine.has_unfinished_requests():
        step = engine.num_steps
        if step >= max_steps:
            raise HarnessError(f"scenario {scenario.name!r} did not finish in {max_steps} steps")
        while pending and pending[0][1].arrival_step <= step:
            i, spec = pending.pop(0)
            prompt = rng.integers(0, vocab_size, spec.prompt_len).tolist()
            engine.add_requests([Request(f"req-{i}", prompt, spec.max_tokens)])
        trace = engine.step().runner_output.trace
        if trace is not None:
            result.steps.append(record_step(trace, step, model))
    result.num_preemptions = engine.scheduler.num_preemptions
    return result


def _cascade_script(rng: np.random.Generator, vocab_size: int) -> list[SchedulerOutput]:
    """A 256-token prefix computed once, then 8 requests that hit it in the prefix cache.

    Step 0 computes the prefix (blocks 1-16). Step 1 admits 8 requests whose prompts start with
    it: each has 256 computed tokens and shares blocks 1-16, so all 16 blocks are common and the
    FlashAttention heuristic picks cascade attention (prefix >= 256 tokens, >= 8 requests). Step 2
    decodes one token each, where the heuristic prefers FlashDecoding (no cascade).
    """
    prefix_len, block_size, num_reqs = 256, 16, 8
    prefix = rng.integers(0, vocab_size, prefix_len).tolist()
    shared = list(range(1, prefix_len // block_size + 1))
    steps = [
        SchedulerOutput(
            scheduled_new_reqs=[NewRequestData("prefix", prefix, [shared], 0, max_tokens=1)],
            scheduled_cached_reqs=[],
            num_scheduled_tokens={"prefix": prefix_len},
            total_num_scheduled_tokens=prefix_len,
            num_common_prefix_blocks=[len(shared)],
        )
    ]
    new_reqs: list[NewRequestData] = []
    for i in range(num_reqs):
        suffix = rng.integers(0, vocab_size, 3 + i).tolist()
        own_block = len(shared) + 1 + i
        new_reqs.append(
            NewRequestData(f"req-{i}", prefix + suffix, [[*shared, own_block]], prefix_len)
        )
    steps.append(
        SchedulerOutput(
            scheduled_new_reqs=new_reqs,
            scheduled_cached_reqs=[],
            num_scheduled_tokens={r.req_id: len(r.prompt_token_ids) - prefix_len for r in new_reqs},
            total_num_scheduled_tokens=sum(len(r.prompt_token_ids) - prefix_len for r in new_reqs),
            num_common_prefix_blocks=[len(shared)],
            finished_req_ids={"prefix"},
        )
    )
    steps.append(
        SchedulerOutput(
            scheduled_new_reqs=[],
            scheduled_cached_reqs=[
                CachedRequestData(r.req_id, False, [], [[]], len(r.prompt_token_ids))
                for r in new_reqs
            ],
            num_scheduled_tokens={r.req_id: 1 for r in new_reqs},
            total_num_scheduled_tokens=num_reqs,
            num_common_prefix_blocks=[len(shared)],
        )
    )
    return steps


# max_model_len 64 keeps block-table rows (and golden files) short.
_TINY = dataclasses.replace(get_model_config("tiny"), max_model_len=64)
_HYBRID = dataclasses.replace(get_model_config("tiny-hybrid"), max_model_len=64)
# Long enough for whole 16-token blocks to leave the 8-token window.
_HYBRID_REQUESTS = (
    ScenarioRequest(20, 14),
    ScenarioRequest(9, 6),
    ScenarioRequest(24, 6, arrival_step=2),
)

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            name="single-prefill",
            description="One 10-token prompt, prefilled in one step (FlashAttention).",
            model_config=_TINY,
            requests=(ScenarioRequest(10, 1),),
            backend="FLASH_ATTN",
        ),
        Scenario(
            name="mixed-prefill-decode",
            description="Requests arrive over time: new prefills join running decodes; FlashInfer "
            "moves the decodes to the front of the batch.",
            model_config=_TINY,
            requests=(
                ScenarioRequest(6, 4),
                ScenarioRequest(9, 3),
                ScenarioRequest(5, 3, arrival_step=2),
                ScenarioRequest(7, 2, arrival_step=3),
            ),
        ),
        Scenario(
            name="hybrid-two-groups",
            description="Alternating full / sliding-window (8) layers with the hybrid KV cache "
            "manager of vLLM 0.9.1+ (disable_hybrid_kv_cache_manager=False): two KV cache "
            "groups, two block tables, two slot mappings, one metadata object per group; the "
            "sliding-window group frees blocks that left the window (FlashAttention).",
            model_config=_HYBRID,
            requests=_HYBRID_REQUESTS,
            backend="FLASH_ATTN",
            disable_hybrid_kv_cache_manager=False,
        ),
        Scenario(
            name="hybrid-unified",
            description="The same model and requests as vLLM 0.9.0 runs them: one KV cache "
            "group whose spec is a FullAttentionSpec carrying the window, one block table that "
            "keeps every block; each sliding layer still attends over its window (FlashAttention).",
            model_config=_HYBRID,
            requests=_HYBRID_REQUESTS,
            backend="FLASH_ATTN",
        ),
        Scenario(
            name="chunked-prefill",
            description="A 20-token prompt prefilled in chunks of an 8-token budget while a short "
            "request decodes (FlashAttention).",
            model_config=_TINY,
            requests=(ScenarioRequest(3, 5), ScenarioRequest(20, 2)),
            backend="FLASH_ATTN",
            max_num_batched_tokens=8,
        ),
        Scenario(
            name="preemption",
            description="Too few blocks for three growing requests: the last admitted is "
            "preempted, its blocks freed, and it is recomputed later (FlashAttention).",
            model_config=dataclasses.replace(_TINY, max_model_len=32),
            requests=(ScenarioRequest(14, 12), ScenarioRequest(14, 12), ScenarioRequest(14, 12)),
            backend="FLASH_ATTN",
            num_gpu_blocks=5,
        ),
        Scenario(
            name="cascade-common-prefix",
            description="Eight requests share a 256-token cached prefix: FlashAttention's "
            "cascade split (prefix pass + suffix pass, merged), then plain decode.",
            model_config=dataclasses.replace(_TINY, max_model_len=512),
            backend="FLASH_ATTN",
            block_size=16,
            num_gpu_blocks=32,
            max_num_seqs=8,
            max_num_batched_tokens=256,
            script=_cascade_script,
        ),
    )
}
"""Every named scenario, by name."""

DEFAULT_SCENARIO = "hybrid-two-groups"


def get_scenario(name: str) -> Scenario:
    """The scenario called ``name``; an unknown name lists the available ones."""
    return lookup(SCENARIOS, name, "scenario")
