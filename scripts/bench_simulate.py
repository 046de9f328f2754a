"""Benchmark: wall time of the full-scale gsm8k simulation (prints; never asserts).

    .venv/bin/python scripts/bench_simulate.py [--device h100-95] [--baseline-steps 30]

Runs the whole 1319-request gsm8k workload on Llama-3.1-8B's shape (``meta``) with decoder-layer
replay, then, as the in-run baseline, the first ``--baseline-steps`` steps with and without replay,
and prints the per-step ratio (and what the full run would cost without replay).
"""

from __future__ import annotations

import argparse
import time

from harness.memory.sizes import format_size
from harness.simulation.simulate import simulate
from harness.simulation.workload import gsm8k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="h100-95")
    parser.add_argument("--baseline-steps", type=int, default=30)
    args = parser.parse_args()

    started = time.perf_counter()
    full = simulate(model="llama-3.1-8b", device=args.device, workload=gsm8k())
    wall = time.perf_counter() - started
    assert full.sizing is not None
    print(
        f"full gsm8k on {args.device}: {len(full.steps)} steps, {full.num_finished} requests, "
        f"num_blocks {full.sizing.num_blocks}, peak {format_size(full.peak_bytes)}, "
        f"oom {'yes' if full.oom else 'no'}; wall {wall:.1f} s "
        f"({full.num_layer_replays} layers replayed)"
    )

    times: dict[bool, float] = {}
    for memoize in (False, True):
        t0 = time.perf_counter()
        simulate(
            model="llama-3.1-8b",
            device=args.device,
            workload=gsm8k(),
            max_steps=args.baseline_steps,
            memoize=memoize,
        )
        times[memoize] = time.perf_counter() - t0
    ratio = times[False] / times[True]
    print(
        f"first {args.baseline_steps} steps (sizing included): no replay {times[False]:.1f} s, "
        f"replay {times[True]:.1f} s, ratio {ratio:.1f}x"
    )


if __name__ == "__main__":
    main()
