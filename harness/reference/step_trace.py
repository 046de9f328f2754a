"""What one ``ModelRunner.execute_model`` step did, for a caller that asked for it.

``execute_model(scheduler_output, trace=True)`` attaches a :class:`StepTrace` to its output
(``output.trace``): what a test, a golden file or the dense oracle needs to see inside the step.
Without ``trace=True`` nothing is copied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from harness.reference.kv_cache_interface import KVCacheSpec


@dataclass(frozen=True)
class GroupTrace:
    """One KV cache group in one step."""

    group_id: int
    kv_cache_spec: KVCacheSpec
    layer_names: list[str]
    block_table: list[list[int]]
    """One row per request, in batch order, cut to its valid blocks."""
    slot_mapping: list[int]
    """(num_tokens,) the KV cache slot of each scheduled token, with this group's block size."""
    metadata: object
    """The one metadata object the group's builder built; every layer of the group received it."""


@dataclass(frozen=True)
class StepTrace:
    """The batch of one step as the runner ran it, every group's view, and the hidden states."""

    req_ids: list[str]
    """Requests in batch order (after the builders' reordering)."""
    num_computed_tokens: list[int]
    """Tokens of each request already in the KV cache before this step."""
    num_scheduled_tokens: list[int]
    """Tokens of each request computed in this step."""
    query_start_loc: list[int]
    """(num_reqs + 1,) start of each request's tokens in the flattened batch."""
    input_ids: list[int]
    """(num_tokens,) token ids of the flattened batch."""
    positions: list[int]
    """(num_tokens,) position of each token in its request."""
    token_ids: list[npt.NDArray[np.int32]]
    """Per request: its whole sequence up to this step's last scheduled token (prompt, then
    outputs)."""
    groups: list[GroupTrace]
    attn_metadata: dict[str, object]
    """Layer name -> the metadata the model received for that layer."""
    hidden_states: torch.Tensor | None
    """(num_tokens, hidden_size) the model's output; ``None`` when the forward was skipped."""
