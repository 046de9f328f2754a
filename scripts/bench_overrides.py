"""Benchmark ``harness overrides`` on vLLM 0.9.0's Python sources against serial ``ast.parse``
of the same files, and against mypy and pyright.

Downloads the vLLM 0.9.0 wheel once (``pip download --no-deps``) and keeps only its ``.py`` files
in a cache directory (``--tree``, default ``~/.cache/harness/vllm-0.9.0``). The runs work on a
temporary copy of that tree, so the edits below never touch it. In one run it times, each the
best of ``--repeat`` rounds taken in turn (so that load on the machine hits every row alike):

- the baseline: a fresh interpreter that finds the files as the checker does and runs
  ``ast.parse`` on each, one after the other;
- the checker cold (fresh cache dir), warm (cached, unchanged tree), and ``--changed`` one base
  file right after editing it with the cache warm, through ``python -m harness.overrides`` and
  through the full ``harness overrides`` CLI;
- the full CLI's start-up alone (``harness --version``);
- mypy (not strict; ``--ignore-missing-imports --follow-imports=silent``, fresh cache dir) and
  pyright (``standard`` mode), unless skipped.

Subprocesses run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed), as an installed
package does, after one warm-up run. It prints wall times, ratios to the serial parse of the same
run, and finding counts; it never asserts. Usage::

    .venv/bin/python scripts/bench_overrides.py [--tree DIR] [--repeat N] [--skip-mypy] [--skip-pyright]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

VLLM = "vllm==0.9.0"
DEFAULT_TREE = Path.home() / ".cache" / "harness" / "vllm-0.9.0"
CHANGED_FILE = "vllm/v1/attention/backends/mla/common.py"
BIN = Path(sys.executable).parent


@dataclass
class Timing:
    """One row of the table."""

    tool: str
    mode: str
    seconds: float
    findings: str


def ensure_tree(tree: Path) -> Path:
    """``tree`` holding vLLM 0.9.0's ``.py`` files, downloading the wheel the first time.

    The wheel is kept beside the tree in ``downloads/``, where ``pip download`` finds it again.
    """
    if (tree / "vllm" / "__init__.py").exists():
        return tree
    downloads = tree.parent / "downloads"
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(downloads), VLLM]
    subprocess.run(pip, check=True)
    (wheel,) = downloads.glob("vllm-0.9.0-*.whl")
    staging = tree.with_name(tree.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(staging, [n for n in archive.namelist() if n.endswith(".py")])
    staging.rename(tree)
    return tree


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

PARSE_SERIALLY = """
import ast, sys, time
from harness.overrides.discover import discover
files, _ = discover(["vllm"])
started = time.perf_counter()
for f in files:
    with open(f.path, "rb") as handle:
        data = handle.read()
    try:
        ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
print(f"{len(files)} files parsed in {time.perf_counter() - started:.3f}s", file=sys.stderr)
"""


def run_timed(cmd: Sequence[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False, env=ENV)
    return time.perf_counter() - start, result


@dataclass
class Mode:
    """One row: how to prepare and build the command, and the fastest run so far."""

    tool: str
    mode: str
    argv: Callable[[int], Sequence[str]]
    """The command for round ``i`` (it may prepare the tree or the cache first)."""
    count: Callable[[str, str], str]
    best: tuple[float, str, str] | None = None

    def run(self, tree: Path, i: int) -> None:
        argv = self.argv(i)
        seconds, result = run_timed(argv, tree)
        if result.returncode not in (0, 1):
            sys.exit(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
        if self.best is None or seconds < self.best[0]:
            self.best = (seconds, result.stdout, result.stderr)

    def timing(self) -> Timing:
        assert self.best is not None
        seconds, out, err = self.best
        return Timing(self.tool, self.mode, seconds, self.count(out, err))


def checker_counts(out: str, err: str) -> str:
    """Finding counts, plus the checker's own time from ``--statistics`` (wall minus start-up)."""
    findings = json.loads(out)
    errors = sum(f["severity"] == "error" for f in findings)
    own = re.search(r"in ([0-9.]+)s", err)
    inside = f"; checker itself {float(own[1]):.3f} s" if own else ""
    return f"{errors} errors, {len(findings) - errors} warnings{inside}"


def parse_counts(out: str, err: str) -> str:
    return err.strip().splitlines()[-1] if err.strip() else ""


ENTRY_POINTS = {
    # The subcommand alone: what pre-commit hooks and CI steps should run.
    "python -m harness.overrides": [sys.executable, "-m", "harness.overrides"],
    # The full CLI, which also registers the other subcommands.
    "harness overrides": [str(BIN / "harness"), "overrides"],
}


def checker_modes(tree: Path, cache_root: Path) -> list[Mode]:
    """Cold, warm and edit-then-``--changed`` runs through each entry point."""
    modes: list[Mode] = []
    for n, (tool, entry) in enumerate(ENTRY_POINTS.items()):
        cache = cache_root / f"cache-{n}"
        base = [*entry, "--format", "json", "--statistics", "--cache-dir", str(cache), "vllm"]

        def cold(i: int, cache: Path = cache, base: list[str] = base) -> list[str]:
            shutil.rmtree(cache, ignore_errors=True)
            return base

        def edited(i: int, base: list[str] = base, n: int = n) -> list[str]:
            path = tree / CHANGED_FILE
            text = path.read_text(encoding="utf-8")
            path.write_text(f"{text.rstrip()}\n# bench edit {n} {i}\n", encoding="utf-8")
            return [*base, "--changed", CHANGED_FILE]

        modes += [
            Mode(tool, "cold (fresh cache)", cold, checker_counts),
            Mode(tool, "warm (cached, unchanged tree)", lambda i, base=base: base, checker_counts),
            Mode(tool, f"--changed {CHANGED_FILE} just edited, warm", edited, checker_counts),
        ]
    return modes


def bench(tree: Path, repeat: int) -> tuple[Timing, list[Timing]]:
    """The serial-parse baseline and the checker rows, measured in turns."""
    parse = Mode(
        "serial ast.parse",
        "baseline (same files)",
        lambda i: [sys.executable, "-c", PARSE_SERIALLY],
        parse_counts,
    )
    with tempfile.TemporaryDirectory(prefix="harness-bench-") as scratch:
        work = Path(scratch) / "tree"
        shutil.copytree(tree / "vllm", work / "vllm")
        modes = checker_modes(work, Path(scratch))
        version = Mode(
            "harness --version",
            "CLI start-up alone",
            lambda i: [str(BIN / "harness"), "--version"],
            lambda o, e: "",
        )
        warm_up = [
            sys.executable,
            "-m",
            "harness.overrides",
            "--no-cache",
            str(work / "vllm" / "envs.py"),
        ]
        run_timed(warm_up, work)  # compile the checker's bytecode once, as an install does
        for i in range(repeat):
            for mode in [parse, *modes, version]:
                mode.run(work, i)
        return parse.timing(), [m.timing() for m in [*modes, version]]


def bench_mypy(tree: Path) -> Timing:
    """mypy (not strict) on the tree alone, with a fresh cache directory."""
    with tempfile.TemporaryDirectory(prefix="mypy-bench-cache-") as cache:
        cmd = [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent"]
        cmd += [
            "--no-site-packages",
            "--cache-dir",
            cache,
            "--config-file",
            os.devnull,
            "-p",
            "vllm",
        ]
        seconds, result = run_timed(cmd, tree)
    summary = (result.stdout.strip().splitlines() or ["(no output)"])[-1]
    overrides = result.stdout.count("[override]")
    return Timing("mypy", "cold, --no-site-packages", seconds, f"{overrides} [override]; {summary}")


def bench_pyright(tree: Path) -> Timing:
    """pyright on the tree alone: an empty venv as its interpreter, like mypy's --no-site-packages."""
    config = {"typeCheckingMode": "standard", "include": ["vllm"]}
    (tree / "pyrightconfig.json").write_text(json.dumps(config))
    with tempfile.TemporaryDirectory(prefix="pyright-bench-venv-") as env:
        venv.create(env, with_pip=False)
        cmd = [
            str(BIN / "pyright"),
            "--outputjson",
            "--pythonpath",
            str(Path(env) / "bin" / "python"),
        ]
        seconds, result = run_timed(cmd, tree)
    diagnostics = json.loads(result.stdout).get("generalDiagnostics", [])
    overrides = sum(d.get("rule") == "reportIncompatibleMethodOverride" for d in diagnostics)
    text = f"{overrides} reportIncompatibleMethodOverride of {len(diagnostics)} diagnostics"
    return Timing("pyright", "standard, cold, no site-packages", seconds, text)


class Table:
    """Prints rows as they are measured (mypy and pyright take minutes)."""

    def __init__(self, tree: Path, baseline: Timing) -> None:
        self.baseline = baseline.seconds
        files = sum(1 for _ in (tree / "vllm").rglob("*.py"))
        print(f"tree: {tree} ({files} .py files of {VLLM})")
        print("ratio = wall time / serial ast.parse of the same files, measured in this run")
        header = f"{'tool':<28} {'mode':<62} {'wall s':>8} {'ratio':>8}  details"
        print(header)
        print("-" * len(header), flush=True)
        self.row(baseline)

    def row(self, r: Timing) -> None:
        ratio = r.seconds / self.baseline
        print(
            f"{r.tool:<28} {r.mode:<62} {r.seconds:>8.3f} {ratio:>7.2f}x  {r.findings}", flush=True
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=DEFAULT_TREE, help="vLLM source cache dir")
    parser.add_argument(
        "--repeat", type=int, default=3, help="rounds (the best run of each row is kept)"
    )
    parser.add_argument("--skip-mypy", action="store_true", help="do not time mypy (slow)")
    parser.add_argument("--skip-pyright", action="store_true", help="do not time pyright (slow)")
    args = parser.parse_args(argv)
    tree = ensure_tree(args.tree.expanduser().resolve())
    baseline, rows = bench(tree, args.repeat)
    table = Table(tree, baseline)
    for r in rows:
        table.row(r)
    if not args.skip_mypy:
        table.row(bench_mypy(tree))
    if not args.skip_pyright:
        table.row(bench_pyright(tree))
    return 0


if __name__ == "__main__":
    sys.exit(main())
