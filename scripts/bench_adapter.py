"""Time the engine adapter on a real vLLM tree beside the reference path, in one run.

Three timings, wall-clock seconds on this machine (issue 26's budget: under 60 s each on a
2-core CPU): the scaling detector on one backend of the tree (``harness memory scaling
--vllm-src TREE --backend NAME``: two child processes, STEPS steps each under the memory
tracker), ``harness diff`` of the tree with itself on that backend (STEPS steps per side), and
the reference scaling detector (``harness memory scaling``, the ``tiny`` model and workload) as
the baseline both are divided by. Prints the numbers and ratios; it never asserts on speed.
The tree is vLLM 0.34.0's wheel sources, fetched once into ~/.cache/harness. Usage::

    .venv/bin/python scripts/bench_adapter.py [--version 0.34.0] [--backend FLASHINFER] [--steps 200]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence

BUDGET_S = 60.0


def _timed(argv: list[str]) -> tuple[float, int, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", *argv], capture_output=True, text=True, check=False
    )
    return (
        time.perf_counter() - started,
        done.returncode,
        done.stdout.strip().splitlines()[-1:][0] if done.stdout.strip() else done.stderr.strip(),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--version", default="0.34.0", help="vLLM release whose sources to use")
    parser.add_argument("--backend", default="FLASHINFER")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    from harness.vllm_tree.fetch import fetch_vllm_source

    tree = str(fetch_vllm_source(args.version).root)
    steps = str(args.steps)
    runs = {
        "reference scaling (tiny)": ["memory", "scaling", "--model", "tiny"],
        f"tree scaling ({args.backend}, {steps} steps)": [
            "memory",
            "scaling",
            "--vllm-src",
            tree,
            "--backend",
            args.backend,
            "--max-steps",
            steps,
        ],
        f"tree diff ({args.backend}, {steps} steps per side)": [
            "diff",
            "--base",
            tree,
            "--head",
            tree,
            "--backend",
            args.backend,
            "--steps",
            steps,
        ],
    }
    seconds: dict[str, float] = {}
    for label, command in runs.items():
        took, code, last = _timed(command)
        seconds[label] = took
        print(f"{label:<48} {took:7.1f} s  exit {code}  {last[:90]}")
    baseline = next(iter(seconds.values()))
    for label, took in list(seconds.items())[1:]:
        verdict = "within" if took < BUDGET_S else "OVER"
        print(
            f"{label:<48} {took / baseline:6.1f}x the reference; {verdict} the {BUDGET_S:g} s budget"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
