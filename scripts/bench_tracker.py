"""Overhead of harness.memory.tracker.MemoryTracker vs an untracked run and vs torch's profiler.

Usage: .venv/bin/python scripts/bench_tracker.py [--rounds N] [--threads T]

Workloads (CPU):
- ``matmul-2048``: a chain of four 2048x2048 float32 matmuls (large ops);
- ``transformer``: a small transformer-style forward (4 layers, hidden 512, 8 x 128 tokens);
- ``small-ops``: 5000 element-wise ops on 16-element tensors (per-op overhead dominates).

Modes, measured in the same process, interleaved round by round; the best round of each is
reported (the minimum is the least noisy estimate on a shared machine). Times are process CPU
time (``time.process_time``, all threads), which other load on the machine does not inflate the
way it inflates wall time; ``--wall`` reports wall time instead.
- ``untracked``; ``tracker`` (MemoryTracker on cpu, with source lines and top allocations);
- ``profiler`` (``torch.profiler.profile(profile_memory=True)``, the anchor to beat) and
  ``profiler+stack`` (``with_stack=True`` too, which like the tracker records source lines).
Each tracked mode also reports its peak so the numbers can be checked against each other.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from harness.memory.sizes import format_size
from harness.memory.tracker import MemoryTracker


def matmul_chain() -> Callable[[], None]:
    a = torch.randn(2048, 2048)
    b = torch.randn(2048, 2048)

    def run() -> None:
        x = a
        for _ in range(4):
            x = x @ b
            x = x * (1.0 / 45.0)  # keep values finite

    return run


def transformer_forward() -> Callable[[], None]:
    torch.manual_seed(0)
    hidden, heads, layers = 512, 8, 4
    weights = [
        (
            torch.randn(hidden, 3 * hidden) / math.sqrt(hidden),
            torch.randn(hidden, hidden) / math.sqrt(hidden),
            torch.randn(hidden, 4 * hidden) / math.sqrt(hidden),
            torch.randn(4 * hidden, hidden) / math.sqrt(4 * hidden),
        )
        for _ in range(layers)
    ]
    tokens = torch.randn(8, 128, hidden)

    def run() -> None:
        x = tokens
        batch, seq, _ = x.shape
        for w_qkv, w_o, w_up, w_down in weights:
            h = torch.nn.functional.layer_norm(x, (hidden,))
            q, k, v = (h @ w_qkv).split(hidden, dim=-1)
            q, k, v = (t.view(batch, seq, heads, -1).transpose(1, 2) for t in (q, k, v))
            attn = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + attn.transpose(1, 2).reshape(batch, seq, hidden) @ w_o
            h = torch.nn.functional.layer_norm(x, (hidden,))
            x = x + torch.nn.functional.gelu(h @ w_up) @ w_down

    return run


def small_ops() -> Callable[[], None]:
    x = torch.ones(16)

    def run() -> None:
        y = x
        for _ in range(1000):
            y = (y + 1) * 0.5 - 0.25
            y = y.relu().neg().abs()

    return run


def time_once(
    run: Callable[[], None], mode: str, clock: Callable[[], float]
) -> tuple[float, int | None]:
    start = clock()
    peak: int | None = None
    if mode == "untracked":
        run()
    elif mode == "tracker":
        with MemoryTracker(devices=("cpu",)) as tracker:
            run()
        peak = tracker.ledger.peak_bytes
    else:
        with profile(
            activities=[ProfilerActivity.CPU],
            profile_memory=True,
            with_stack=mode == "profiler+stack",
        ):
            run()
    return clock() - start, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--wall", action="store_true", help="wall time instead of CPU time")
    args = parser.parse_args()
    clock = time.perf_counter if args.wall else time.process_time
    torch.set_num_threads(args.threads)
    modes = ["untracked", "tracker", "profiler", "profiler+stack"]
    workloads = {
        "matmul-2048": matmul_chain(),
        "transformer": transformer_forward(),
        "small-ops": small_ops(),
    }
    kind = "wall" if args.wall else "CPU"
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), {kind} time, "
        f"best of {args.rounds} rounds"
    )
    header = (
        f"{'workload':<13}{'untracked':>12}{'tracker':>12}{'x':>7}{'profiler':>12}{'x':>7}"
        f"{'prof+stack':>12}{'x':>7}{'tracker/profiler':>18}  peak (tracker)"
    )
    print(header)
    for name, run in workloads.items():
        for mode in modes:  # warm-up: lazy imports, allocator caches
            time_once(run, mode, clock)
        best = dict.fromkeys(modes, float("inf"))
        peak = 0
        for _ in range(args.rounds):
            for mode in modes:
                seconds, measured = time_once(run, mode, clock)
                best[mode] = min(best[mode], seconds)
                if measured is not None:
                    peak = measured
        base = best["untracked"]
        print(
            f"{name:<13}{base * 1e3:>10.1f}ms{best['tracker'] * 1e3:>10.1f}ms"
            f"{best['tracker'] / base:>6.2f}x{best['profiler'] * 1e3:>10.1f}ms"
            f"{best['profiler'] / base:>6.2f}x{best['profiler+stack'] * 1e3:>10.1f}ms"
            f"{best['profiler+stack'] / base:>6.2f}x"
            f"{best['tracker'] / best['profiler']:>17.2f}x  {format_size(peak)}"
        )


if __name__ == "__main__":
    main()
