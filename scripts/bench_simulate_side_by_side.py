"""Time the full-scale gsm8k simulation of two versions side by side, in one run (never asserts).

    .venv/bin/python scripts/bench_simulate_side_by_side.py [--before 3b5bad4] [--after REF]
        [--repeat 3] [--device h100-95] [--threads N]

``--before`` (default ``3b5bad4``, the commit before the engine redesign, issue 27) and
``--after`` (default: this checkout as it is) are checked out into temporary git worktrees
(:func:`harness.bisect.worktree.temporary_worktree`: removed afterwards, the working tree
untouched). Each round runs both, in
alternating order, each in a fresh interpreter of this venv that imports its own ``harness``:
a warm-up of 3 steps, then the whole 1319-request gsm8k workload on Llama-3.1-8B's shape
(``meta``, layer replay on, ``--threads`` torch threads: by default what a plain
``harness memory simulate`` gets, one per CPU). CPU time (the process's, steadier than wall time
on a shared machine) and wall time are printed per run, then the best of each side and the
after/before ratio of the CPU times.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

RUN = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import harness, torch
assert harness.__file__.startswith(sys.argv[1]), harness.__file__
try:
    from harness.simulation.simulate import simulate
    from harness.simulation.workload import gsm8k
except ImportError:  # before the redesign: harness.memory held the simulation
    from harness.memory.simulate import simulate
    from harness.memory.workload import gsm8k
torch.set_num_threads(int(sys.argv[3]))
simulate(model="llama-3.1-8b", device=sys.argv[2], workload=gsm8k(), max_steps=3)
cpu, wall = time.process_time(), time.perf_counter()
result = simulate(model="llama-3.1-8b", device=sys.argv[2], workload=gsm8k())
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
print(json.dumps({"cpu": cpu, "wall": wall, "steps": len(result.steps),
                  "finished": result.num_finished, "peak": result.peak_bytes}))
"""


def run(tree: Path, device: str, threads: int) -> dict[str, float]:
    """One timed simulation with the ``harness`` package of ``tree``."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(tree), device, str(threads)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"the simulation in {tree} failed:\n{done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", default="3b5bad4", help="git ref (default: %(default)s)")
    parser.add_argument("--after", default=None, help="git ref (default: this checkout)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (default: %(default)s)")
    parser.add_argument("--device", default="h100-95")
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="torch intra-op threads, as a plain run gets them (default: %(default)s)",
    )
    args = parser.parse_args()

    from harness.bisect.worktree import resolve, temporary_worktree
    from harness.errors import HarnessError

    try:
        shas = {
            side: resolve(ROOT, ref)
            for side, ref in (("before", args.before), ("after", args.after))
            if ref
        }
    except HarnessError as exc:
        print(f"bench_simulate_side_by_side: cannot compare: {exc}")
        return 0
    after = f"{args.after} ({shas['after'][:12]})" if args.after else f"this checkout ({ROOT})"
    print(f"before: {args.before} ({shas['before'][:12]}), after: {after}")
    best: dict[str, dict[str, float]] = {}
    with contextlib.ExitStack() as stack:
        sides = {
            side: stack.enter_context(temporary_worktree(ROOT, sha)) for side, sha in shas.items()
        }
        sides.setdefault("after", ROOT)
        for round_number in range(args.repeat):
            order = ["before", "after"] if round_number % 2 == 0 else ["after", "before"]
            for side in order:
                timing = run(sides[side], args.device, args.threads)
                print(
                    f"round {round_number + 1} {side:6}: cpu {timing['cpu']:6.2f} s, "
                    f"wall {timing['wall']:6.2f} s, {timing['steps']:.0f} steps, "
                    f"{timing['finished']:.0f} requests, peak {timing['peak']:.0f} bytes"
                )
                if side not in best or timing["cpu"] < best[side]["cpu"]:
                    best[side] = timing
    before, after = best["before"], best["after"]
    print(
        f"best of {args.repeat}: before cpu {before['cpu']:.2f} s (wall {before['wall']:.2f} s), "
        f"after cpu {after['cpu']:.2f} s (wall {after['wall']:.2f} s); "
        f"after/before {after['cpu'] / before['cpu']:.3f}x (cpu), "
        f"{after['wall'] / before['wall']:.3f}x (wall)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
