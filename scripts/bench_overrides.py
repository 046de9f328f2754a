"""Benchmark ``harness overrides`` against mypy and pyright on vLLM 0.9.0's Python sources.

Downloads the vLLM 0.9.0 wheel once (``pip download --no-deps``) and keeps only its ``.py`` files
in a cache directory. Then, on that same tree and in the same run, it times:

- the checker cold (fresh cache dir), warm (cached), and ``--changed`` one file warm;
- the CLI start-up alone (``harness --version``), the floor under every checker number;
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
import shutil
import subprocess
import sys
import tempfile
import time
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


def best_of(repeat: int, cmd: Callable[[], Sequence[str]], cwd: Path) -> tuple[float, str]:
    """The fastest of ``repeat`` runs (``cmd()`` is rebuilt each time) and the last stdout."""
    times, out = [], ""
    for _ in range(repeat):
        seconds, result = run_timed(cmd(), cwd)
        if result.returncode not in (0, 1):
            sys.exit(f"{' '.join(cmd())} failed ({result.returncode}):\n{result.stderr[-2000:]}")
        times.append(seconds)
        out = result.stdout
    return min(times), out


def checker_counts(out: str) -> str:
    findings = json.loads(out)
    errors = sum(f["severity"] == "error" for f in findings)
    return f"{errors} errors, {len(findings) - errors} warnings"


def bench_checker(tree: Path, repeat: int) -> list[Timing]:
    harness = [str(BIN / "harness")]
    cache = Path(tempfile.mkdtemp(prefix="harness-bench-cache-"))

    def command(*extra: str) -> Callable[[], list[str]]:
        return lambda: [
            *harness,
            "overrides",
            "--format",
            "json",
            "--cache-dir",
            str(cache),
            *extra,
        ]

    def cold() -> list[str]:
        shutil.rmtree(cache, ignore_errors=True)
        return command("vllm")()

    rows = []
    seconds, _ = best_of(repeat, lambda: [*harness, "--version"], tree)
    rows.append(Timing("harness", "start-up only (--version)", seconds, ""))
    for mode, cmd in [
        ("cold (fresh cache)", cold),
        ("warm (cached)", command("vllm")),
        (f"--changed {CHANGED_FILE}, warm", command("vllm", "--changed", CHANGED_FILE)),
    ]:
        seconds, out = best_of(repeat, cmd, tree)
        rows.append(Timing("harness overrides", mode, seconds, checker_counts(out)))
    shutil.rmtree(cache, ignore_errors=True)
    return rows


def bench_mypy(tree: Path) -> Timing:
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
    config = {"typeCheckingMode": "standard", "include": ["vllm"]}
    (tree / "pyrightconfig.json").write_text(json.dumps(config))
    cmd = [str(BIN / "pyright"), "--outputjson", "--pythonpath", sys.executable]
    seconds, result = run_timed(cmd, tree)
    diagnostics = json.loads(result.stdout).get("generalDiagnostics", [])
    overrides = sum(d.get("rule") == "reportIncompatibleMethodOverride" for d in diagnostics)
    text = f"{overrides} reportIncompatibleMethodOverride of {len(diagnostics)} diagnostics"
    return Timing("pyright", "standard", seconds, text)


def print_table(rows: list[Timing], tree: Path) -> None:
    files = sum(1 for _ in (tree / "vllm").rglob("*.py"))
    cold = next(r.seconds for r in rows if r.mode.startswith("cold"))
    print(f"tree: {tree} ({files} .py files of {VLLM}); ratio = time / checker cold")
    header = f"{'tool':<18} {'mode':<58} {'wall s':>8} {'ratio':>8}  findings"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r.tool:<18} {r.mode:<58} {r.seconds:>8.3f} {r.seconds / cold:>7.2f}x  {r.findings}"
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
    if not args.skip_mypy:
        rows.append(bench_mypy(tree))
    if not args.skip_pyright:
        rows.append(bench_pyright(tree))
    print_table(rows, tree)
    return 0


if __name__ == "__main__":
    sys.exit(main())
