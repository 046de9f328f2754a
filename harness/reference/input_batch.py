"""The persistent batch (vLLM 0.9.0's ``v1/worker/gpu_input_batch.py``), reduced to what the runner needs.

Request rows live at stable indices between steps; finished requests leave holes that ``condense``
fills by moving rows from the end, and attention backends may reorder rows with ``swap_states``.
Every per-request array is CPU numpy, so shapes never depend on a device (``meta`` works).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np
import numpy.typing as npt
import torch

from harness.reference.block_table import MultiGroupBlockTable


@dataclass
class CachedRequestState:
    """The runner's copy of one request: its tokens, its blocks and how far it has been computed."""

    req_id: str
    prompt_token_ids: list[int]
    block_ids: list[list[int]]
    """One list of block ids per KV cache group."""
    num_computed_tokens: int
    output_token_ids: list[int] = field(default_factory=list[int])

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)


class InputBatch:
    """Requests of the running batch, one row each, with their token ids and block tables."""

    def __init__(
        self,
        max_num_reqs: int,
        max_model_len: int,
        max_num_batched_tokens: int,
        device: torch.device,
        pin_memory: bool,
        block_sizes: list[int],
    ) -> None:
        self.max_num_reqs = max_num_reqs
        self.max_model_len = max_model_len

        self._req_ids: list[str | None] = []
        self.req_id_to_index: dict[str, int] = {}

        self.token_ids_cpu_tensor = torch.zeros((max_num_reqs, max_model_len), dtype=torch.int32)
        """(max_num_reqs, max_model_len) prompt then output token ids of each row."""
        self.token_ids_cpu: npt.NDArray[np.int32] = self.token_ids_cpu_tensor.numpy()
        self.num_tokens: npt.NDArray[np.int32] = np.zeros(max_num_reqs, dtype=np.int32)
        """(max_num_reqs,) prompt + output tokens known for each row."""
        self.num_computed_tokens_cpu_tensor = torch.zeros(max_num_reqs, dtype=torch.int32)
        """(max_num_reqs,) tokens of each row whose KV is already cached before this step."""
        self.num_computed_tokens_cpu: npt.NDArray[np.int32] = (
            self.num_computed_tokens_cpu_tensor.numpy()
        )
        self.block_table = MultiGroupBlockTable(
            max_num_reqs=max_num_reqs,
            max_model_len=max_model_len,
            max_num_batched_tokens=max_num_batched_tokens,
            pin_memory=pin_memory,
            device=device,
            block_sizes=block_sizes,
        )

    @property
    def req_ids(self) -> list[str]:
        """Request ids by row; only valid after ``condense`` (no holes)."""
        return cast("list[str]", self._req_ids)

    @property
    def num_reqs(self) -> int:
        return len(self.req_id_to_index)

    def add_request(self, request: CachedRequestState, req_index: int | None = None) -> None:
        """Put ``request`` in row ``req_index`` (default: after the last row)."""
        if req_index is None:
            req_index = self.num_reqs
        if req_index >= self.max_num_reqs:
            raise ValueError(f"row {req_index} out of range (max_num_reqs={self.max_num_reqs})")
        if req_index == len(self._req_ids):
            self._req_ids.append(request.req_id)
        else:
            self._req_ids[req_index] = request.req_id
        self.req_id_to_index[request.req_id] = req_index

        num_prompt = request.num_prompt_tokens
        self.token_ids_cpu[req_index, :num_prompt] = request.prompt_token_ids
        self.token_ids_cpu[req_index, num_prompt : request.num_tokens] = request.output_token_ids
        self.num_tokens[req_index] = request.num_tokens
        self.num_computed_tokens_cpu[req_index] = request.num_computed_tokens
        self.block_table.add_row(request.block_ids, req_index)

    def remove_request(self, req_id: str) -> int | None:
        """Drop ``req_id``, leaving a hole at its row; returns the row (None if unknown)."""
        req_index = self.req_id_to_index.pop(req_id, None)
        if req_index is not None:
            self._req_ids[req_index] = None
        return req_index

    def swap_states(self, i1: int, i2: int) -> None:
        """Exchange rows ``i1`` and ``i2``, block-table rows included (batch reordering)."""
        id1, id2 = self._req_ids[i1], self._req_ids[i2]
        assert id1 is not None and id2 is not None, "swap_states needs two occupied rows"
        self._req_ids[i1], self._req_ids[i2] = id2, id1
        self.req_id_to_index[id1], self.req_id_to_index[id2] = i2, i1
        n = int(max(self.num_tokens[i1], self.num_tokens[i2]))
        self.token_ids_cpu[[i1, i2], :n] = self.token_ids_cpu[[i2, i1], :n]
        for arr in (self.num_tokens, self.num_computed_tokens_cpu):
            arr[[i1, i2]] = arr[[i2, i1]]
        self.block_table.swap_row(i1, i2)

    def condense(self, empty_req_indices: list[int]) -> None:
        """Fill the holes left by removed requests by moving the last rows into them.

        ``empty_req_indices`` must be sorted in descending order (as vLLM requires); it is consumed.
        """
        num_reqs = self.num_reqs
        if num_reqs == 0:
            self._req_ids.clear()
            return
        empty = set(empty_req_indices)
        last_req_index = num_reqs + len(empty_req_indices) - 1
        while empty_req_indices:
            while last_req_index in empty:
                last_req_index -= 1
            empty_index = empty_req_indices.pop()  # the smallest hole
            if empty_index >= last_req_index:
                break
            req_id = self._req_ids[last_req_index]
            assert req_id is not None
            self._req_ids[empty_index] = req_id
            self._req_ids[last_req_index] = None
            self.req_id_to_index[req_id] = empty_index
            n = int(self.num_tokens[last_req_index])
            self.token_ids_cpu[empty_index, :n] = self.token_ids_cpu[last_req_index, :n]
            for arr in (self.num_tokens, self.num_computed_tokens_cpu):
                arr[empty_index] = arr[last_req_index]
            self.block_table.move_row(last_req_index, empty_index)
            last_req_index -= 1
        del self._req_ids[num_reqs:]
