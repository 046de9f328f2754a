"""Messages between the scheduler and the model runner (vLLM 0.9.0's ``sched/output.py`` and ``v1/outputs.py``).

Only the fields the reference runner reads are kept; names are vLLM's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.reference.step_trace import StepTrace


@dataclass
class NewRequestData:
    """A request scheduled for the first time (or again after being finished and re-added)."""

    req_id: str
    prompt_token_ids: list[int]
    block_ids: list[list[int]]
    """One list of block ids per KV cache group."""
    num_computed_tokens: int
    """Tokens whose KV is already in the cache (a prefix-cache hit) before this step."""
    max_tokens: int = 16


@dataclass
class CachedRequestData:
    """A request the runner has seen before: only what changed since then."""

    req_id: str
    resumed_from_preemption: bool
    """If true, ``new_block_ids`` replace the request's blocks instead of extending them."""
    new_token_ids: list[int]
    """Tokens the runner does not know yet (vLLM: only with pipeline parallelism); usually empty."""
    new_block_ids: list[list[int]]
    """One list of newly allocated block ids per KV cache group."""
    num_computed_tokens: int
    """Computed tokens before this step."""


@dataclass
class SchedulerOutput:
    """What to run this step: which requests, how many tokens each, with which blocks."""

    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: list[CachedRequestData]
    num_scheduled_tokens: dict[str, int]
    """req_id -> number of tokens scheduled this step."""
    total_num_scheduled_tokens: int
    num_common_prefix_blocks: list[int]
    """Per KV cache group: blocks shared by every running request (cascade attention)."""
    finished_req_ids: set[str] = field(default_factory=set[str])
    """Requests that finished since the previous step; the runner drops their state."""


@dataclass
class ModelRunnerOutput:
    """Greedy samples of one step, one (possibly empty) list per request in the batch."""

    req_ids: list[str]
    req_id_to_index: dict[str, int]
    sampled_token_ids: list[list[int]]
    """Empty for a request still in (chunked) prefill: its sample is discarded."""
    trace: StepTrace | None = None
    """What the step did, when ``execute_model(..., trace=True)`` asked (not a vLLM field)."""


EMPTY_MODEL_RUNNER_OUTPUT = ModelRunnerOutput(req_ids=[], req_id_to_index={}, sampled_token_ids=[])
