"""Time ``harness overrides`` on pathological single files against ``ast.parse`` of each.

Each input (``PATHOLOGICAL``) is one file holding the drift of ``DRIFT`` after something built
to defeat a linear scan or a memoised walk: a 1 MB string literal full of the checker's own
patterns, a 200,000-character assignment target with 20,000 keyword arguments, or a chain of
5,000 classes. Before the scans and walks were made linear, an 80 KB literal took 9 s, a 240 KB
one 83 s, and a 3,000-class chain 71 s. Each round runs, per input, a fresh interpreter
parsing the file (``ast.parse``), then ``python -m harness.overrides --no-cache`` on it; the
table prints the best of ``--repeat`` rounds and the ratio. It never asserts (the test suite
bounds how the work grows, by operation counts). Usage::

    .venv/bin/python scripts/bench_overrides_pathological.py [--repeat N] [--scale N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

DRIFT = """\
class A:
    def func(self, a: int, b: int) -> int:
        return a + b

    def func2(self, a: int, b: int) -> int:
        return self.func(a, b=b)


class B(A):
    def func(self, a: int, bb: int) -> int:
        return a - bb
"""
_MB = 1_000_000


def _literal(unit: str, size: int) -> str:
    """A class holding a ``size``-character string literal made of ``unit``, then the drift."""
    text = unit * (size // len(unit))
    return f"class C:\n    X = {text!r}\n\n    def f(self, x: 'C') -> None:\n        y = C()\n\n\n{DRIFT}"


def _long_line(n: int) -> str:
    """One assignment with a 10n-character target and ``n`` keyword arguments, then the drift."""
    kwargs = ", ".join(f"k{i}=A()" for i in range(n))
    return f"def f():\n    {'a' * 10 * n} = g({kwargs})\n\n\n{DRIFT}"


def _chain(n: int, body: str) -> str:
    """``n`` classes, each subclassing the previous one, then a drift at the bottom."""
    classes = "".join(f"class C{i}(C{i - 1}):\n{body.format(i=i)}" for i in range(1, n))
    return f"class C0:\n    def func(self, a, b): ...\n{classes}class A(C{n - 1}):\n" + (
        "    def func2(self, a, b):\n        return self.func(a, b=b)\n\n\nclass B(A):\n"
        "    def func(self, a, bb): ...\n"
    )


PATHOLOGICAL: dict[str, Callable[[int], str]] = {
    "literal-self-annotations": lambda scale: _literal("self.a:", _MB // scale),
    "literal-constructor-assignments": lambda scale: _literal("x: =A(", _MB // scale),
    "literal-receiver-calls": lambda scale: _literal("A().a(", _MB // scale),
    "literal-ignore-comments": lambda scale: _literal("#harness: ignore[", _MB // scale),
    "long-line-of-assignments": lambda scale: _long_line(20_000 // scale),
    "chain-of-5000-empty-classes": lambda scale: _chain(5000 // scale, "    pass\n"),
    "chain-of-5000-overrides": lambda scale: _chain(
        5000 // scale, "    def func(self, a, b): ...\n"
    ),
    "chain-of-5000-own-methods": lambda scale: _chain(
        5000 // scale, "    def m{i}(self):\n        return self.func(1, b=2)\n"
    ),
}
"""Each input at full size (``scale`` 1) or ``1/scale`` of it; every one holds an error."""

PARSE = "import ast, sys; ast.parse(open(sys.argv[1], 'rb').read())"


def _seconds(cmd: Sequence[str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"bench: {' '.join(cmd)} failed ({done.returncode})")
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scale", type=int, default=1, help="inputs at 1/N of full size")
    args = parser.parse_args(argv)
    best: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="harness-pathological-") as name:
        folders = {}
        for label, make in PATHOLOGICAL.items():
            folder = Path(name) / label
            folder.mkdir()
            (folder / "drift.py").write_text(make(args.scale), encoding="utf-8")
            folders[label] = folder
        for _ in range(args.repeat):
            for label, folder in folders.items():
                rows = {
                    "parse": [sys.executable, "-c", PARSE, "drift.py"],
                    "check": [sys.executable, "-m", "harness.overrides", "--no-cache", "."],
                }
                for row, cmd in rows.items():
                    seconds = _seconds(cmd, folder)
                    best[label, row] = min(seconds, best.get((label, row), seconds))
    print(f"best of {args.repeat} rounds, inputs at 1/{args.scale} of full size")
    print(f"{'input':<34} {'ast.parse s':>12} {'checker s':>10} {'x parse':>8}")
    for label in PATHOLOGICAL:
        parse, check = best[label, "parse"], best[label, "check"]
        print(f"{label:<34} {parse:>12.3f} {check:>10.3f} {check / parse:>7.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
