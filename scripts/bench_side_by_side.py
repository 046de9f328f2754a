"""Time ``harness overrides`` of two versions of the checker side by side, in one run.

``--before REF`` (a git ref, default ``HEAD``) and ``--after REF`` (default: the working tree)
are exported with ``git archive`` to a scratch directory. On the same tree of Python files (``--tree``, default a
copy of the installed torch package's ``.py`` files), each round runs, in turn, for before and
after:

- the checker cold: a fresh ``--cache-dir`` and a fresh ``XDG_CACHE_HOME`` (so installed and
  standard-library summaries are recomputed too), ``--jobs`` workers;
- the codec alone: every file of the tree summarised once, then ``codec.loads(codec.dumps(s))``
  with every deferred part decoded, three times, in a fresh interpreter.

Cold runs are timed as wall time and as CPU time (user + system of the checker and its
workers): on a shared machine the CPU time is the steadier of the two.

It prints the best of ``--repeat`` rounds and after/before ratios; it never asserts. Usage::

    .venv/bin/python scripts/bench_side_by_side.py [--before REF] [--after REF] [--tree DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CODEC_ONLY = """
import sys, time
from harness.overrides import codec
from harness.overrides.discover import discover
from harness.overrides.summary import summarize
files, _ = discover([sys.argv[1]])
summaries = []
for f in files:
    with open(f.path, "rb") as handle:
        summaries.append(summarize(handle.read()))
started = time.process_time()
for _ in range(3):
    for s in summaries:
        back = codec.loads(codec.dumps(s))
        back.calls
        for c in back.classes:
            c.methods, c.calls
print(f"{time.process_time() - started:.4f}")
"""


def export(ref: str, into: Path) -> Path:
    """The ``harness`` package of ``ref``, unpacked below ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, "harness"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    into.mkdir(parents=True)
    tar = into / "harness.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as handle:
        handle.extractall(into, filter="data")
    return into


def default_tree(scratch: Path) -> Path:
    """A copy of the ``.py`` files of the installed torch package."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        sys.exit("bench: torch is not installed; pass --tree DIR")
    source = Path(spec.origin).parent
    tree = scratch / "tree"
    for path in source.rglob("*.py"):
        target = tree / "torch" / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return tree


def timed(cmd: Sequence[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system, the command and its workers), stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if result.returncode not in (0, 1):
        sys.exit(f"bench: {' '.join(cmd)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return seconds, cpu, result.stdout


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--before", default="HEAD", help="git ref of the 'before' checker")
    parser.add_argument("--after", help="git ref of the 'after' checker (default: working tree)")
    parser.add_argument("--tree", type=Path, help="tree to check (default: torch's .py files)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="harness-side-by-side-") as name:
        scratch = Path(name)
        tree = args.tree.resolve() if args.tree else default_tree(scratch)
        after = ROOT if args.after is None else export(args.after, scratch / "after")
        roots = {"before": export(args.before, scratch / "before"), "after": after}
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        best: dict[tuple[str, str], float] = {}
        for i in range(args.repeat):
            for label, root in roots.items():
                env = {**base, "PYTHONPATH": str(root), "XDG_CACHE_HOME": str(scratch / "xdg")}
                shutil.rmtree(scratch / "xdg", ignore_errors=True)
                shutil.rmtree(scratch / "cache", ignore_errors=True)
                cold = [sys.executable, "-m", "harness.overrides", "--format", "json"]
                cold += ["--jobs", str(args.jobs), "--cache-dir", str(scratch / "cache"), "."]
                seconds, cpu, _ = timed(cold, tree, env)
                best[label, "cold"] = min(seconds, best.get((label, "cold"), seconds))
                best[label, "cold cpu"] = min(cpu, best.get((label, "cold cpu"), cpu))
                _, _, out = timed([sys.executable, "-c", CODEC_ONLY, "."], tree, env)
                codec_s = float(out.strip())
                best[label, "codec"] = min(codec_s, best.get((label, "codec"), codec_s))
            print(f"round {i + 1}/{args.repeat} done", file=sys.stderr, flush=True)
        files = sum(1 for _ in tree.rglob("*.py"))
        after_name = args.after or "working tree"
        print(f"tree: {tree} ({files} .py files); before = {args.before}, after = {after_name}")
        print(f"best of {args.repeat} rounds, before and after measured in turns")
        print(f"{'row':<44} {'before s':>9} {'after s':>9} {'after/before':>13}")
        rows = (
            ("cold", "checker cold (fresh caches), wall"),
            ("cold cpu", "checker cold, CPU (user+sys, with workers)"),
            ("codec", "codec round trip x3, CPU (process_time)"),
        )
        for row, text in rows:
            before, after = best["before", row], best["after", row]
            print(f"{text:<44} {before:>9.3f} {after:>9.3f} {after / before:>12.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
