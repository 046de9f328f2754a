"""Named memory scenarios shared by the CPU/meta budget tests and the GPU tests.

Each scenario builds its inputs in ``setup(device)`` (not measured, like a fixture) and allocates in
``body(state)`` (measured). The budgets below are used unchanged on ``cpu``, ``meta:<profile>`` and
``cuda``; the exact peaks of the CPU runs are golden files under ``golden/memory/budgets/``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

MLP_BUDGET = "12 MiB"
"""An MLP forward over 256 tokens: input 1 MiB + up 4 MiB + activation 4 MiB live at once."""
KV_COPY_BUDGET = "20 MiB"
"""A contiguous copy of a permuted 16 MiB KV-cache layer (the flashinfer-oom pattern, small)."""

HIDDEN, INTERMEDIATE, TOKENS = 1024, 4096, 256
NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM = 256, 16, 8, 128


def mlp_setup(device: str) -> dict[str, Any]:
    """Weights and input of a 1024 -> 4096 -> 1024 float32 MLP on ``device``."""
    generator = torch.Generator().manual_seed(0)
    on = torch.device(device)

    def weight(rows: int, cols: int) -> torch.Tensor:
        return (torch.randn(rows, cols, generator=generator) / cols**0.5).to(on)

    return {
        "up": weight(INTERMEDIATE, HIDDEN),
        "down": weight(HIDDEN, INTERMEDIATE),
        "x": torch.randn(TOKENS, HIDDEN, generator=generator).to(on),
    }


def mlp_body(state: dict[str, Any]) -> torch.Tensor:
    """``down(gelu(up(x)))`` without autograd."""
    with torch.no_grad():
        hidden = torch.nn.functional.linear(state["x"], state["up"])
        return torch.nn.functional.linear(torch.nn.functional.gelu(hidden), state["down"])


def kv_copy_setup(device: str) -> dict[str, Any]:
    """One layer's KV cache, ``(2, num_blocks, block_size, kv_heads, head_dim)`` bf16."""
    shape = (2, NUM_BLOCKS, BLOCK_SIZE, KV_HEADS, HEAD_DIM)
    return {"kv_cache": torch.zeros(shape, dtype=torch.bfloat16, device=device)}


def kv_copy_body(state: dict[str, Any]) -> torch.Tensor:
    """Materialise the layer block-major: a full copy of the cache."""
    return state["kv_cache"].transpose(0, 1).contiguous()


@dataclass(frozen=True)
class Scenario:
    """A named measured region with its budget."""

    name: str
    budget: str
    setup: Callable[[str], dict[str, Any]]
    body: Callable[[dict[str, Any]], torch.Tensor]


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("mlp-forward", MLP_BUDGET, mlp_setup, mlp_body),
        Scenario("kv-layer-copy", KV_COPY_BUDGET, kv_copy_setup, kv_copy_body),
    )
}
