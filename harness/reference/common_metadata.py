"""Per-step attention metadata shared by every KV cache group
(``vllm/v1/attention/backends/utils.py``: the batch fields of vLLM 0.9.2, the CPU twins of 0.10.0;
vLLM 0.9.0 has only ``query_start_loc`` and ``seq_lens``; see ``docs/fidelity.md``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class CommonAttentionMetadata:
    """What every group's builder needs about the batch, computed once per step by the runner.

    Tokens of request ``i`` are ``query_start_loc[i]:query_start_loc[i + 1]``;
    each ``_cpu`` twin holds the same values on the CPU, so building works on ``meta``.
    """

    query_start_loc: torch.Tensor
    """(num_reqs + 1,) int32 on the device: start of each request's tokens; last entry is the total."""
    query_start_loc_cpu: torch.Tensor
    """(num_reqs + 1,) int32 on the CPU: same values."""
    seq_lens: torch.Tensor
    """(num_reqs,) int32 on the device: tokens in each request's KV cache after this step."""
    seq_lens_cpu: torch.Tensor
    """(num_reqs,) int32 on the CPU: same values."""
    num_computed_tokens_cpu: torch.Tensor
    """(num_reqs,) int32 on the CPU: tokens already in the KV cache before this step."""
    num_reqs: int
    """Requests in the batch."""
    num_actual_tokens: int
    """Scheduled tokens in the batch (without padding)."""
    max_query_len: int
    """Most tokens scheduled for one request in this step."""
