"""Time ``harness overrides`` of two versions of the checker side by side, in one run.

``--before REF`` (a git ref, default ``HEAD``) and ``--after REF`` (default: the working tree)
are exported with ``git archive`` to a scratch directory. On the same tree of Python files
(``--tree``, default a copy of the installed torch package's ``.py`` files), each round runs,
in turn: the baseline (a fresh interpreter finding the files as the checker does and running
``ast.parse`` on each, one after the other), then for before and after, through
``python -m harness.overrides`` and through the full ``harness overrides`` CLI:

- cold: a fresh ``--cache-dir`` and a fresh ``XDG_CACHE_HOME`` (so installed and
  standard-library summaries are recomputed too; with ``--keep-installed`` that machine-wide
  cache stays warm, as in ``scripts/bench_overrides.py`` and for a user's second project),
  ``--jobs`` workers;
- warm: the same caches again, the tree unchanged;
- ``--changed``: one file (``--changed-file``) edited just before, caches warm;
- the codec alone (unless ``--skip-codec``): every file summarised once, then
  ``codec.loads(codec.dumps(s))`` with every deferred part decoded, three times;
- other checkers named with ``--tool NAME=COMMAND`` (``--tool "ty=ty check --exit-zero"``,
  ``--tool "pyrefly=pyrefly check"``), each run once per round on its own copy of the tree,
  the tree's path appended; their exit status is not read.

Each command's peak resident memory (its largest process, workers included) is reported too.

Every checker (and entry point) works on its own copy of the tree. Cold runs are timed as wall
time and as CPU time (user + system of the checker and its workers): on a shared machine the
CPU time is the steadier of the two. It prints the best of ``--repeat`` rounds, after/before
ratios and ratios to the serial parse of the same run; it never asserts. Usage::

    .venv/bin/python scripts/bench_side_by_side.py [--before REF] [--after REF] [--tree DIR]
        [--changed-file PATH] [--repeat N] [--jobs N] [--skip-codec] [--keep-installed]
        [--tool NAME=COMMAND ...]
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = Path(sys.executable).parent / "harness"
VLLM_CHANGED = "vllm/v1/attention/backends/mla/common.py"

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

PARSE_SERIALLY = """
import ast, sys, time
from harness.overrides.discover import discover
files, _ = discover(["."])
for f in files:
    with open(f.path, "rb") as handle:
        data = handle.read()
    try:
        ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
"""

ENTRY_POINTS = {
    "-m": [sys.executable, "-m", "harness.overrides"],
    "CLI": [sys.executable, str(CLI), "overrides"],
}
"""The subcommand alone, and the full CLI (the console script run by this interpreter)."""

ROWS = (
    ("cold -m", "cold, python -m harness.overrides, wall"),
    ("cold CLI", "cold, harness overrides (CLI), wall"),
    ("cold cpu -m", "cold, python -m, CPU (user+sys, workers)"),
    ("cold cpu CLI", "cold, CLI, CPU (user+sys, workers)"),
    ("warm -m", "warm (unchanged tree), python -m, wall"),
    ("warm CLI", "warm (unchanged tree), CLI, wall"),
    ("changed -m", "--changed FILE just edited, python -m, wall"),
    ("changed CLI", "--changed FILE just edited, CLI, wall"),
    ("codec", "codec round trip x3, CPU (process_time)"),
)


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


def copy_tree(tree: Path, into: Path) -> Path:
    """The ``.py`` files of ``tree``, copied to ``into`` (each checker edits its own copy)."""
    for path in tree.rglob("*.py"):
        target = into / path.relative_to(tree)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return into


def changed_file(tree: Path, option: str | None) -> str:
    """The file the ``--changed`` rows edit, relative to ``tree``: ``option``, else vLLM's
    MLA backend when the tree holds it, else the largest file."""
    if option is not None:
        if not (tree / option).is_file():
            sys.exit(f"bench: --changed-file {option} is not a file under {tree}")
        return option
    if (tree / VLLM_CHANGED).is_file():
        return VLLM_CHANGED
    largest = max(tree.rglob("*.py"), key=lambda p: p.stat().st_size)
    return str(largest.relative_to(tree))


def timed(
    cmd: Sequence[str], cwd: Path, env: dict[str, str], *, check: bool = True
) -> tuple[float, float, str, int]:
    """Wall seconds, CPU seconds (user + system, the command and its workers), stdout, and
    peak resident memory in KiB (the largest of the command and its workers)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    cpu = usage.ru_utime + usage.ru_stime
    if check and process.returncode not in (0, 1):
        sys.exit(f"bench: {' '.join(cmd)} failed ({process.returncode}):\n{stderr[-2000:]}")
    return seconds, cpu, stdout, usage.ru_maxrss


class Best:
    """The fastest time of each ``(label, row)`` so far, and the findings each run printed."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[str, str], float] = {}
        self.outputs: dict[tuple[str, str], set[str]] = {}
        self.peak_kib: dict[str, int] = {}

    def add(self, label: str, row: str, seconds: float, output: str | None = None) -> None:
        key = (label, row)
        self.seconds[key] = min(seconds, self.seconds.get(key, seconds))
        if output is not None:
            self.outputs.setdefault(key, set()).add(output)

    def peak(self, label: str, kib: int) -> None:
        self.peak_kib[label] = max(kib, self.peak_kib.get(label, 0))


def one_round(
    i: int,
    roots: dict[str, Path],
    trees: dict[tuple[str, str], Path],
    scratch: Path,
    base: dict[str, str],
    args: argparse.Namespace,
    edited: str,
    best: Best,
    tools: dict[str, list[str]],
) -> None:
    """Baseline and the other checkers, then every row of before and after, in turns."""
    parse_env = {**base, "PYTHONPATH": str(roots["after"])}
    any_tree = next(iter(trees.values()))
    seconds, cpu, _, _ = timed([sys.executable, "-c", PARSE_SERIALLY], any_tree, parse_env)
    best.add("parse", "parse", seconds)
    best.add("parse", "parse cpu", cpu)
    for name, command in tools.items():
        seconds, cpu, _, kib = timed([*command, "."], trees[name, "tool"], base, check=False)
        best.add(name, "tool", seconds)
        best.add(name, "tool cpu", cpu)
        best.peak(name, kib)
    for label, root in roots.items():
        for entry, command in ENTRY_POINTS.items():
            tree = trees[label, entry]
            xdg, cache = scratch / f"xdg-{label}-{entry}", scratch / f"cache-{label}-{entry}"
            env = {**base, "PYTHONPATH": str(root), "XDG_CACHE_HOME": str(xdg)}
            if not args.keep_installed:
                shutil.rmtree(xdg, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
            cmd = [*command, "--format", "json", "--cache-dir", str(cache)]
            cold = [*cmd, "--jobs", str(args.jobs), "."]
            seconds, cpu, out, kib = timed(cold, tree, env)
            best.add(label, f"cold {entry}", seconds, out)
            best.add(label, f"cold cpu {entry}", cpu)
            best.peak(label, kib)
            seconds, _, out, _ = timed([*cmd, "."], tree, env)
            best.add(label, f"warm {entry}", seconds, out)
            path = tree / edited
            text = path.read_text(encoding="utf-8")
            path.write_text(f"{text.rstrip()}\n# bench edit {i}\n", encoding="utf-8")
            seconds, _, out, _ = timed([*cmd, ".", "--changed", edited], tree, env)
            best.add(label, f"changed {entry}", seconds, out)
        if not args.skip_codec:
            env = {**base, "PYTHONPATH": str(root)}
            _, _, out, _ = timed([sys.executable, "-c", CODEC_ONLY, "."], trees[label, "-m"], env)
            best.add(label, "codec", float(out.strip()))


def report(best: Best, args: argparse.Namespace, files: int, edited: str) -> None:
    """The table: best seconds, after/before, and each side's ratio to the serial parse."""
    after_name = args.after or "working tree"
    parse, parse_cpu = best.seconds["parse", "parse"], best.seconds["parse", "parse cpu"]
    print(f"tree: {args.tree or 'torch'} ({files} .py files); --changed file: {edited}")
    kept = "kept warm" if args.keep_installed else "fresh in every cold run"
    print(f"before = {args.before}, after = {after_name}; best of {args.repeat} rounds,")
    print(f"installed and standard-library summaries: {kept}")
    print("each round: serial parse, then before and after in turns; x parse = s / serial parse")
    print("(CPU rows: / the serial parse's CPU time)")
    header = f"{'row':<44} {'before s':>9} {'after s':>9} {'after/before':>13}"
    header += f" {'before x parse':>15} {'after x parse':>14}"
    print(header)
    print("-" * len(header))
    print(f"{'serial ast.parse of the same files, wall':<44} {parse:>9.3f} {parse:>9.3f}")
    print(f"{'serial ast.parse, CPU (user+sys)':<44} {parse_cpu:>9.3f} {parse_cpu:>9.3f}")
    for row, text in ROWS:
        if ("before", row) not in best.seconds:
            continue
        before, after = best.seconds["before", row], best.seconds["after", row]
        line = f"{text:<44} {before:>9.3f} {after:>9.3f} {after / before:>12.3f}x"
        if row != "codec":
            unit = parse_cpu if "cpu" in row else parse
            line += f" {before / unit:>14.3f}x {after / unit:>13.3f}x"
        print(line)
    for name in args.tools:
        wall, cpu = best.seconds[name, "tool"], best.seconds[name, "tool cpu"]
        cold = best.seconds["after", "cold -m"]
        line = f"{name + ', cold, wall':<44} {wall:>9.3f} {'':>9} {'':>13} {wall / parse:>14.3f}x"
        print(f"{line}   after / {name}: {cold / wall:.3f}x")
        print(
            f"{name + ', cold, CPU (user+sys)':<44} {cpu:>9.3f} {'':>9} {'':>13} {cpu / parse_cpu:>14.3f}x"
        )
    peaks = ", ".join(f"{label} {kib / 1024:.0f} MiB" for label, kib in best.peak_kib.items())
    print(f"peak resident memory of a cold run (largest process): {peaks}")
    for row, _ in ROWS:
        outputs = {label: best.outputs.get((label, row), set()) for label in ("before", "after")}
        if outputs["before"] and outputs["before"] != outputs["after"]:
            print(f"note: {row}: before and after printed different findings")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--before", default="HEAD", help="git ref of the 'before' checker")
    parser.add_argument("--after", help="git ref of the 'after' checker (default: working tree)")
    parser.add_argument("--tree", type=Path, help="tree to check (default: torch's .py files)")
    parser.add_argument("--changed-file", help="file the --changed rows edit, relative to --tree")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--skip-codec", action="store_true", help="do not time the codec alone")
    parser.add_argument(
        "--keep-installed",
        action="store_true",
        help="cold runs keep the machine-wide cache of installed and standard-library summaries",
    )
    parser.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="another checker to time on the same tree, once per round (repeatable)",
    )
    args = parser.parse_args(argv)
    tools: dict[str, list[str]] = {}
    for spec in args.tool:
        name, sep, command = spec.partition("=")
        if not sep or not name or not command.strip():
            parser.error(f"--tool {spec!r}: write NAME=COMMAND")
        tools[name] = shlex.split(command)
    args.tools = list(tools)
    with tempfile.TemporaryDirectory(prefix="harness-side-by-side-") as name:
        scratch = Path(name)
        source = args.tree.expanduser().resolve() if args.tree else default_tree(scratch)
        edited = changed_file(source, args.changed_file)
        after = ROOT if args.after is None else export(args.after, scratch / "after")
        roots = {"before": export(args.before, scratch / "before"), "after": after}
        trees = {
            (label, entry): copy_tree(source, scratch / f"tree-{label}-{entry}")
            for label in roots
            for entry in ENTRY_POINTS
        }
        for name in tools:
            trees[name, "tool"] = copy_tree(source, scratch / f"tree-{name}")
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        for label, root in roots.items():  # compile each checker's bytecode once
            env = {**base, "PYTHONPATH": str(root), "XDG_CACHE_HOME": str(scratch / "xdg-w")}
            for command in ENTRY_POINTS.values():
                timed([*command, "--no-cache", edited], trees[label, "-m"], env)
        best = Best()
        for i in range(args.repeat):
            one_round(i, roots, trees, scratch, base, args, edited, best, tools)
            print(f"round {i + 1}/{args.repeat} done", file=sys.stderr, flush=True)
        files = sum(1 for _ in source.rglob("*.py"))
        report(best, args, files, edited)
    return 0


if __name__ == "__main__":
    sys.exit(main())
