"""A vLLM-V1-style scheduler (vLLM 0.9.0's ``v1/core/sched/scheduler.py``), reduced to the essentials.

Every step gets a token budget (``max_num_batched_tokens``) and at most ``max_num_seqs`` running
requests. Running requests go first (decodes and unfinished chunked prefills), then waiting ones;
prefills are chunked to fit the budget. When the pool runs out of blocks the most recently
admitted running request is preempted: its blocks are freed and it is recomputed later.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.reference.config import SchedulerConfig
from harness.reference.kv_cache_interface import KVCacheConfig
from harness.reference.kv_cache_manager import KVCacheManager
from harness.reference.outputs import (
    CachedRequestData,
    ModelRunnerOutput,
    NewRequestData,
    SchedulerOutput,
)


class RequestStatus(enum.IntEnum):
    """Where a request is in its life; every status after ``PREEMPTED`` is finished (as vLLM)."""

    WAITING = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()

    @staticmethod
    def is_finished(status: RequestStatus) -> bool:
        return status > RequestStatus.PREEMPTED


@dataclass
class Request:
    """One generation request: greedy decoding until ``max_tokens`` new tokens (no EOS)."""

    request_id: str
    prompt_token_ids: list[int]
    max_tokens: int
    status: RequestStatus = RequestStatus.WAITING
    num_computed_tokens: int = 0
    output_token_ids: list[int] = field(default_factory=list[int])

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def is_finished(self) -> bool:
        return RequestStatus.is_finished(self.status)

    def token_ids(self, start: int, stop: int) -> list[int]:
        """Tokens ``start:stop`` of the prompt followed by the output, without joining the two
        (a long prompt would be copied for every running request in every step)."""
        prompt, output = self.prompt_token_ids, self.output_token_ids
        num_prompt = len(prompt)
        if stop <= num_prompt:
            return prompt[start:stop]
        if start >= num_prompt:
            return output[start - num_prompt : stop - num_prompt]
        return prompt[start:] + output[: stop - num_prompt]


class Scheduler:
    """Decides each step's requests and token counts, and owns their KV cache blocks."""

    def __init__(self, scheduler_config: SchedulerConfig, kv_cache_config: KVCacheConfig) -> None:
        self.max_num_running_reqs = scheduler_config.max_num_seqs
        self.max_num_scheduled_tokens = scheduler_config.max_num_batched_tokens
        self.max_model_len = scheduler_config.max_model_len
        self.kv_cache_manager = KVCacheManager(kv_cache_config, self.max_model_len)
        self.requests: dict[str, Request] = {}
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.finished_req_ids: set[str] = set()
        self.num_preemptions = 0

    def add_request(self, request: Request) -> None:
        if request.request_id in self.requests:
            raise ValueError(f"duplicate request id {request.request_id!r}")
        if request.num_prompt_tokens + request.max_tokens > self.max_model_len:
            raise ValueError(
                f"request {request.request_id!r}: prompt ({request.num_prompt_tokens}) + max_tokens "
                f"({request.max_tokens}) exceeds max_model_len={self.max_model_len}"
            )
        self.requests[request.request_id] = request
        self.waiting.append(request)

    def has_unfinished_requests(self) -> bool:
        return bool(self.waiting or self.running)

    def get_num_unfinished_requests(self) -> int:
        return len(self.waiting) + len(self.running)

    def schedule(self) -> SchedulerOutput:
        """Pick this step's work and advance every scheduled request's ``num_computed_tokens``."""
        token_budget = self.max_num_scheduled_tokens
        num_scheduled_tokens: dict[str, int] = {}
        new_block_ids: dict[str, list[list[int]]] = {}
        scheduled_running: list[Request] = []
        scheduled_new: list[Request] = []
        scheduled_resumed: list[Request] = []
        preempted = False

        # Running requests first: decodes and the rest of chunked prefills.
        req_index = 0
        while req_index < len(self.running) and token_budget > 0:
            request = self.running[req_index]
            num_new_tokens = min(request.num_tokens - request.num_computed_tokens, token_budget)
            if num_new_tokens <= 0:
                req_index += 1
                continue
            while True:
                blocks = self.kv_cache_manager.allocate_slots(
                    request.request_id, request.num_computed_tokens, num_new_tokens
                )
                if blocks is not None:
                    break
                # Out of blocks: preempt the most recently admitted request (maybe this one).
                victim = self.running.pop()
                self._preempt(victim)
                preempted = True
                if victim is request:
                    break
            if blocks is None:
                break
            scheduled_running.append(request)
            new_block_ids[request.request_id] = blocks
            num_scheduled_tokens[request.request_id] = num_new_tokens
            token_budget -= num_new_tokens
            req_index += 1

        # Then waiting requests, unless something was just preempted (as vLLM).
        while self.waiting and token_budget > 0 and not preempted:
            if len(self.running) == self.max_num_running_reqs:
                break
            request = self.waiting[0]
            num_new_tokens = min(request.num_tokens - request.num_computed_tokens, token_budget)
            blocks = self.kv_cache_manager.allocate_slots(
                request.request_id, request.num_computed_tokens, num_new_tokens
            )
            if blocks is None:
                break
            self.waiting.popleft()
            self.running.append(request)
            if request.status == RequestStatus.PREEMPTED:
                scheduled_resumed.append(request)
            else:
                scheduled_new.append(request)
            request.status = RequestStatus.RUNNING
            new_block_ids[request.request_id] = self.kv_cache_manager.get_block_ids(
                request.request_id
            )
            num_scheduled_tokens[request.request_id] = num_new_tokens
            token_budget -= num_new_tokens

        num_groups = len(self.kv_cache_manager.single_type_managers)
        num_common_prefix_blocks = [0] * num_groups
        if self.running:
            num_common_prefix_blocks = self.kv_cache_manager.get_num_common_prefix_blocks(
                self.running[0].request_id, len(self.running)
            )

        def cached(request: Request, resumed: bool) -> CachedRequestData:
            # As vLLM 0.9.0: the tokens scheduled now (the last sample, or a prompt chunk).
            start = request.num_computed_tokens
            stop = start + num_scheduled_tokens[request.request_id]
            return CachedRequestData(
                req_id=request.request_id,
                resumed_from_preemption=resumed,
                new_token_ids=request.token_ids(start, stop),
                new_block_ids=new_block_ids[request.request_id],
                num_computed_tokens=request.num_computed_tokens,
            )

        scheduler_output = SchedulerOutput(
            scheduled_new_reqs=[
                NewRequestData(
                    req_id=r.request_id,
                    prompt_token_ids=r.prompt_token_ids,
                    block_ids=new_block_ids[r.request_id],
                    num_computed_tokens=r.num_computed_tokens,
                    max_tokens=r.max_tokens,
                )
                for r in scheduled_new
            ],
            scheduled_cached_reqs=[cached(r, True) for r in scheduled_resumed]
            + [cached(r, False) for r in scheduled_running],
            num_scheduled_tokens=num_scheduled_tokens,
            total_num_scheduled_tokens=sum(num_scheduled_tokens.values()),
            num_common_prefix_blocks=num_common_prefix_blocks,
            finished_req_ids=self.finished_req_ids,
        )
        # Advance after building the output: the runner gets the counts from before this step.
        for req_id, num_tokens in num_scheduled_tokens.items():
            self.requests[req_id].num_computed_tokens += num_tokens
        self.finished_req_ids = set()
        return scheduler_output

    def finish_requests(self, request_ids: Iterable[str], finished_status: RequestStatus) -> None:
        """Finish requests from outside (a stop string, EOS, an abort); unknown ids are ignored.
        Blocks are freed now; the runner hears of it in the next step's ``finished_req_ids``.
        """
        assert RequestStatus.is_finished(finished_status)
        for req_id in set(request_ids):
            request = self.requests.get(req_id)
            if request is None:
                continue
            if request.status == RequestStatus.RUNNING:
                self.running.remove(request)
            else:
                self.waiting.remove(request)
            request.status = finished_status
            self.kv_cache_manager.free(req_id)
            del self.requests[req_id]
            self.finished_req_ids.add(req_id)

    def _preempt(self, request: Request) -> None:
        self.kv_cache_manager.free(request.request_id)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        self.waiting.appendleft(request)
        self.num_preemptions += 1

    def update_from_output(
        self, scheduler_output: SchedulerOutput, model_runner_output: ModelRunnerOutput
    ) -> list[Request]:
        """Append sampled tokens, finish requests at ``max_tokens``; returns the finished ones."""
        finished: list[Request] = []
        index = model_runner_output.req_id_to_index
        for req_id in scheduler_output.num_scheduled_tokens:
            request = self.requests[req_id]
            if request.status != RequestStatus.RUNNING:
                continue
            request.output_token_ids.extend(model_runner_output.sampled_token_ids[index[req_id]])
            if (
                len(request.output_token_ids) >= request.max_tokens
                or request.num_tokens >= self.max_model_len
            ):
                request.status = RequestStatus.FINISHED_LENGTH_CAPPED
                finished.append(request)
        if finished:
            done = {r.request_id for r in finished}
            self.running = [r for r in self.running if r.request_id not in done]
            for request in finished:
                self.kv_cache_manager.free(request.request_id)
                del self.requests[request.request_id]
            self.finished_req_ids |= done
        return finished
