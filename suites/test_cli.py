"""The top-level ``harness`` command: light start-up, clean errors."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from harness.cli import main


def test_building_the_parser_imports_no_torch() -> None:
    # pre-commit runs `harness overrides` on every commit: start-up must not pay for torch.
    code = "import sys, harness.cli; harness.cli.build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_harness_overrides_imports_the_checker_alone() -> None:
    # The pre-commit hook's path: no other area's modules (their imports cost start-up time).
    code = (
        "import sys; from harness.cli import main; main(['overrides', '--list-rules']); "
        "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('harness.')}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    areas = set(ast.literal_eval(out.stdout.strip().splitlines()[-1]))
    assert areas <= {"cli", "errors", "extras", "overrides"}, areas
    assert "overrides" in areas


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "demo" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["demo", "--scenario", "nope"], ["demo", "--backend", "NOPE"]])
def test_unknown_names_are_clean_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: error: ")
    assert "available" in err
    assert "Traceback" not in err
