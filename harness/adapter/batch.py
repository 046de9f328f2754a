"""The persistent batch the adapter keeps between steps, and one step's inputs from it.

:class:`PersistentBatch` applies each :class:`~harness.reference.outputs.SchedulerOutput` to
the reference's copy of vLLM 0.9.0's ``InputBatch`` in the order of vLLM 0.9.0's
``GPUModelRunner._update_states`` (finished and unscheduled requests leave, new and resumed ones
fill the holes, ``condense``); the batch order is then set by the era's reorder
(:mod:`harness.adapter.reorder`). :meth:`PersistentBatch.prepare` computes what vLLM 0.9.0's
``_prepare_inputs`` computes on the host: positions, slot mapping, ``query_start_loc`` and
``seq_lens``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from harness.reference.block_table import BlockTable
from harness.reference.input_batch import CachedRequestState, InputBatch
from harness.reference.outputs import SchedulerOutput


@dataclass(frozen=True)
class StepInputs:
    """One step's host-side inputs, rows in batch order."""

    req_ids: list[str]
    num_scheduled_tokens: npt.NDArray[np.int32]
    """(num_reqs,) tokens scheduled per row."""
    num_computed_tokens: npt.NDArray[np.int32]
    """(num_reqs,) tokens already in the KV cache per row."""
    num_prompt_tokens: npt.NDArray[np.int32]
    """(num_reqs,) prompt length per row."""
    positions: npt.NDArray[np.int64]
    """(num_tokens,) position of each scheduled token in its request."""
    query_start_loc: npt.NDArray[np.int32]
    """(num_reqs + 1,) cumulative scheduled tokens."""
    seq_lens: npt.NDArray[np.int32]
    """(num_reqs,) computed + scheduled tokens per row."""

    @property
    def num_reqs(self) -> int:
        return len(self.req_ids)

    @property
    def num_tokens(self) -> int:
        return int(self.query_start_loc[-1])

    @property
    def max_query_len(self) -> int:
        return int(self.num_scheduled_tokens.max())


class PersistentBatch:
    """Requests in rows that persist between steps (module docstring)."""

    def __init__(
        self, max_num_reqs: int, max_model_len: int, max_num_batched_tokens: int, block_size: int
    ) -> None:
        self.input_batch = InputBatch(
            max_num_reqs=max_num_reqs,
            max_model_len=max_model_len,
            max_num_batched_tokens=max_num_batched_tokens,
            device=torch.device("cpu"),
            pin_memory=False,
            block_sizes=[block_size],
        )
        self.requests: dict[str, CachedRequestState] = {}
        self.swaps: list[tuple[int, int]] = []
        """Every ``swap_states(i, j)`` since the last :meth:`update` (the step's reorder)."""
        swap = self.input_batch.swap_states

        def recorded(i1: int, i2: int) -> None:
            self.swaps.append((int(i1), int(i2)))
            swap(i1, i2)

        self.input_batch.swap_states = recorded  # type: ignore[method-assign]

    @property
    def block_table(self) -> BlockTable:
        """The one KV cache group's block table (the reference's ``BlockTable``)."""
        return self.input_batch.block_table[0]

    def update(self, scheduler_output: SchedulerOutput) -> None:
        """vLLM 0.9.0's ``_update_states``, without the reorder."""
        self.swaps.clear()
        batch = self.input_batch
        removed: list[int] = []
        for req_id in scheduler_output.finished_req_ids:
            self.requests.pop(req_id, None)
            index = batch.remove_request(req_id)
            if index is not None:
                removed.append(index)
        for req_id in batch.req_id_to_index.keys() - scheduler_output.num_scheduled_tokens.keys():
            index = batch.remove_request(req_id)
            assert index is not None
            removed.append(index)
        to_add: list[str] = []
        for new in scheduler_output.scheduled_new_reqs:
            self.requests[new.req_id] = CachedRequestState(
                req_id=new.req_id,
                prompt_token_ids=list(new.prompt_token_ids),
                block_ids=[list(ids) for ids in new.block_ids],
                num_computed_tokens=new.num_computed_tokens,
            )
            to_add.append(new.req_id)
        for data in scheduler_output.scheduled_cached_reqs:
            state = self.requests[data.req_id]
            state.num_computed_tokens = data.num_computed_tokens
            num_new = data.num_computed_tokens + len(data.new_token_ids) - state.num_tokens
            if num_new > 0:
                state.output_token_ids.extend(data.new_token_ids[-num_new:])
            if data.resumed_from_preemption:
                state.block_ids = [list(ids) for ids in data.new_block_ids]
            else:
                for ids, new_ids in zip(state.block_ids, data.new_block_ids, strict=True):
                    ids.extend(new_ids)
            index = batch.req_id_to_index.get(data.req_id)
            if index is None:
                to_add.append(data.req_id)
                continue
            batch.num_computed_tokens_cpu[index] = data.num_computed_tokens
            batch.block_table.append_row(data.new_block_ids, index)
        removed.sort(reverse=True)
        for req_id in to_add:
            batch.add_request(self.requests[req_id], removed.pop() if removed else None)
        if removed:
            batch.condense(removed)

    def prepare(self, scheduler_output: SchedulerOutput) -> StepInputs:
        """Commit the block table and compute the step's host inputs (vLLM 0.9.0's
        ``_prepare_inputs``, before any device copy)."""
        batch = self.input_batch
        num_reqs = batch.num_reqs
        batch.block_table.commit(num_reqs)
        req_ids = list(batch.req_ids)
        scheduled = np.array(
            [scheduler_output.num_scheduled_tokens[r] for r in req_ids], dtype=np.int32
        )
        computed: npt.NDArray[np.int32] = np.array(
            batch.num_computed_tokens_cpu[:num_reqs], dtype=np.int32
        )
        cu = np.cumsum(scheduled)
        req_indices = np.repeat(np.arange(num_reqs), scheduled)
        offsets = np.arange(int(cu[-1])) - np.repeat(cu - scheduled, scheduled)
        positions: npt.NDArray[np.int64] = np.asarray(computed[req_indices] + offsets, np.int64)
        batch.block_table.compute_slot_mapping(req_indices, positions)
        prompts = np.array([self.requests[r].num_prompt_tokens for r in req_ids], dtype=np.int32)
        return StepInputs(
            req_ids=req_ids,
            num_scheduled_tokens=scheduled,
            num_computed_tokens=computed,
            num_prompt_tokens=prompts,
            positions=positions,
            query_start_loc=np.concatenate([[0], cu]).astype(np.int32),
            seq_lens=np.asarray(computed + scheduled, dtype=np.int32),
        )
