"""A rigged model for tests: the runner's real forward runs, then its logits are replaced so that
greedy sampling picks a scripted token for every request in the batch.

Everything else is the real generation path: scheduler, runner inputs, every group's metadata,
paged attention, sampling, detokenisation and stop handling. The script sees each request's
prompt and the tokens it has generated so far (vLLM's names: ``runner.requests``,
``runner.input_batch.req_ids``, one logits row per request in batch order).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from harness.reference.runner import ModelRunner

NextToken = Callable[[list[int], list[int]], int]
"""``(prompt_token_ids, output_token_ids) -> the next token``."""


def rig(runner: ModelRunner, next_token: NextToken) -> None:
    model = runner.model
    real_compute_logits = model.compute_logits

    def compute_logits(hidden_states: torch.Tensor) -> torch.Tensor:
        logits = real_compute_logits(hidden_states)
        rigged = torch.full_like(logits, -1e4)
        for row, req_id in enumerate(runner.input_batch.req_ids):
            state = runner.requests[req_id]
            rigged[row, next_token(state.prompt_token_ids, state.output_token_ids)] = 0.0
        return rigged

    model.compute_logits = compute_logits  # type: ignore[method-assign]


def scripted(scripts: Callable[[list[int]], list[int]], fallback: int) -> NextToken:
    """Emit ``scripts(prompt)`` token by token, then ``fallback`` forever."""

    def next_token(prompt: list[int], output: list[int]) -> int:
        script = scripts(prompt)
        return script[len(output)] if len(output) < len(script) else fallback

    return next_token
