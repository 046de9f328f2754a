"""Benchmark ``harness overrides`` against mypy and pyright on vLLM 0.9.0's Python sources.

Downloads the vLLM 0.9.0 wheel once (``pip download --no-deps``) and keeps only its ``.py`` files
in a cache directory. Then, on that same tree and in the same run, it times:

- the checker cold (fresh cache dir), warm (cached), and ``--changed`` one file warm, through
  ``python -m harness.overrides`` and through the full ``harness overrides`` CLI;
- the full CLI's start-up alone (``harness --version``);
- mypy (not strict; ``--ignore-missing-imports --follow-imports=silent``, fresh cache dir);
- pyright (``standard`` mode).

and prints wall times, ratios to the checker's cold run, and finding counts. It prints; it never
asserts. Usage::

    .venv/bin/python scripts/bench_overrides.py [--tree DIR] [--skip-mypy] [--skip-pyright]
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


def run_timed(cmd: Sequence[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, result


def best_of(repeat: int, cmd: Callable[[], Sequence[str]], cwd: Path) -> tuple[float, str, str]:
    """The fastest of ``repeat`` runs (``cmd()`` is rebuilt each time), its stdout and stderr."""
    best: tuple[float, str, str] | None = None
    for _ in range(repeat):
        argv = cmd()
        seconds, result = run_timed(argv, cwd)
        if result.returncode not in (0, 1):
            sys.exit(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
        if best is None or seconds < best[0]:
            best = (seconds, result.stdout, result.stderr)
    assert best is not None
    return best


def checker_counts(out: str, err: str) -> str:
    """Finding counts, plus the checker's own time from ``--statistics`` (wall minus start-up)."""
    findings = json.loads(out)
    errors = sum(f["severity"] == "error" for f in findings)
    own = re.search(r"in ([0-9.]+)s", err)
    inside = f"; checker itself {float(own[1]):.3f} s" if own else ""
    return f"{errors} errors, {len(findings) - errors} warnings{inside}"


ENTRY_POINTS = {
    # The subcommand alone: what pre-commit hooks and CI steps should run.
    "python -m harness.overrides": [sys.executable, "-m", "harness.overrides"],
    # The full CLI, which also registers the other subcommands.
    "harness overrides": [str(BIN / "harness"), "overrides"],
}


def checker_command(
    entry: list[str], cache: Path, *extra: str, fresh: bool = False
) -> Callable[[], list[str]]:
    """The checker's argv on ``cache``; ``fresh`` empties the cache first (a cold run)."""

    def argv() -> list[str]:
        if fresh:
            shutil.rmtree(cache, ignore_errors=True)
        return [*entry, "--format", "json", "--statistics", "--cache-dir", str(cache), *extra]

    return argv


def bench_checker(tree: Path, repeat: int) -> list[Timing]:
    """Cold, warm and ``--changed`` runs through each entry point, on one cache directory."""
    cache = Path(tempfile.mkdtemp(prefix="harness-bench-cache-"))
    rows = []
    for tool, entry in ENTRY_POINTS.items():
        for mode, cmd in [
            ("cold (fresh cache)", checker_command(entry, cache, "vllm", fresh=True)),
            ("warm (cached)", checker_command(entry, cache, "vllm")),
            (
                f"--changed {CHANGED_FILE}, warm",
                checker_command(entry, cache, "vllm", "--changed", CHANGED_FILE),
            ),
        ]:
            seconds, out, err = best_of(repeat, cmd, tree)
            rows.append(Timing(tool, mode, seconds, checker_counts(out, err)))
    seconds, _, _ = best_of(repeat, lambda: [str(BIN / "harness"), "--version"], tree)
    rows.append(Timing("harness --version", "CLI start-up alone", seconds, ""))
    shutil.rmtree(cache, ignore_errors=True)
    return rows


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

    def __init__(self, tree: Path, cold_seconds: float) -> None:
        self.cold = cold_seconds
        files = sum(1 for _ in (tree / "vllm").rglob("*.py"))
        print(f"tree: {tree} ({files} .py files of {VLLM}); ratio = wall time / checker cold")
        header = f"{'tool':<28} {'mode':<56} {'wall s':>8} {'ratio':>8}  findings"
        print(header)
        print("-" * len(header), flush=True)

    def row(self, r: Timing) -> None:
        ratio = r.seconds / self.cold
        print(
            f"{r.tool:<18} {r.mode:<58} {r.seconds:>8.3f} {ratio:>7.2f}x  {r.findings}", flush=True
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=DEFAULT_TREE, help="vLLM source cache dir")
    parser.add_argument("--repeat", type=int, default=3, help="checker runs per mode (best kept)")
    parser.add_argument("--skip-mypy", action="store_true", help="do not time mypy (slow)")
    parser.add_argument("--skip-pyright", action="store_true", help="do not time pyright (slow)")
    args = parser.parse_args(argv)
    tree = ensure_tree(args.tree.expanduser().resolve())
    rows = bench_checker(tree, args.repeat)
    table = Table(tree, next(r.seconds for r in rows if r.mode.startswith("cold")))
    for r in rows:
        table.row(r)
    if not args.skip_mypy:
        table.row(bench_mypy(tree))
    if not args.skip_pyright:
        table.row(bench_pyright(tree))
    return 0


if __name__ == "__main__":
    sys.exit(main())
