"""Measure ``harness overrides`` recall on the held-out drift corpus (and pyright's, if installed).

Each case under ``scripts/heldout_overrides/`` marks the lines that must be reported with
``# drift``; ``*_clean_*`` cases must give nothing. Prints one row per case and the totals;
it never asserts. Usage::

    .venv/bin/python scripts/heldout_overrides.py [--skip-pyright]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "heldout_overrides"
PYRIGHT_CODES = {"reportIncompatibleMethodOverride", "reportIncompatibleVariableOverride"}


def cases() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.name.startswith("c") and p.name[1:3].isdigit())


def marked(case: Path) -> set[tuple[str, int]]:
    files = [case] if case.is_file() else sorted(case.rglob("*.py"))
    out: set[tuple[str, int]] = set()
    for file in files:
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if line.rstrip().endswith("# drift"):
                out.add((file.relative_to(CORPUS).as_posix(), number))
    return out


def checker_lines(case: Path) -> set[tuple[str, int]]:
    command = [sys.executable, "-m", "harness.overrides", "--isolated", "--no-cache"]
    done = subprocess.run(
        [*command, "--format", "json", case.name],
        cwd=CORPUS,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"checker failed on {case.name}: {done.stderr}")
    return {(f["path"], f["line"]) for f in json.loads(done.stdout) if f["code"].startswith("HO1")}


def pyright_lines() -> dict[str, set[tuple[str, int]]] | None:
    pyright = shutil.which("pyright") or str(Path(sys.executable).parent / "pyright")
    if not Path(pyright).exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "pyrightconfig.json"
        config.write_text(
            json.dumps({"typeCheckingMode": "standard", "pythonVersion": "3.11"}),
            encoding="utf-8",
        )
        done = subprocess.run(
            [pyright, "--outputjson", "-p", str(config), str(CORPUS)],
            capture_output=True,
            text=True,
            check=False,
        )
    report = json.loads(done.stdout)
    out: dict[str, set[tuple[str, int]]] = {}
    for diag in report.get("generalDiagnostics", []):
        if diag.get("rule") not in PYRIGHT_CODES:
            continue
        path = Path(diag["file"]).resolve().relative_to(CORPUS).as_posix()
        case = path.split("/", 1)[0].removesuffix(".py")
        out.setdefault(case, set()).add((path, diag["range"]["start"]["line"] + 1))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-pyright", action="store_true")
    args = parser.parse_args(argv)
    pyright = None if args.skip_pyright else pyright_lines()
    totals = {"drift": 0, "caught": 0, "clean": 0, "false_pos": 0, "py_caught": 0, "py_fp": 0}
    print(f"{'case':<40} {'harness':>8} {'pyright':>8}")
    for case in cases():
        name = case.name.removesuffix(".py")
        want = marked(case)
        got = checker_lines(case)
        py = None if pyright is None else pyright.get(name, set())
        if want:
            totals["drift"] += 1
            hit = want <= got
            totals["caught"] += hit
            py_hit = None if py is None else want <= py
            totals["py_caught"] += bool(py_hit)
            cells = (
                "caught" if hit else "MISSED",
                "-" if py_hit is None else ("caught" if py_hit else "missed"),
            )
        else:
            totals["clean"] += 1
            totals["false_pos"] += bool(got)
            totals["py_fp"] += bool(py)
            cells = ("FP" if got else "ok", "-" if py is None else ("fp" if py else "ok"))
        print(f"{name:<40} {cells[0]:>8} {cells[1]:>8}")
    print()
    print(
        f"harness overrides: {totals['caught']}/{totals['drift']} drift cases caught, "
        f"{totals['false_pos']}/{totals['clean']} clean cases with a finding"
    )
    if pyright is not None:
        print(
            f"pyright (standard): {totals['py_caught']}/{totals['drift']} drift cases caught, "
            f"{totals['py_fp']}/{totals['clean']} clean cases with a finding"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
