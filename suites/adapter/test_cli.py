"""The adapter's command lines: bad input is one line and exit 2 (no child process started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from suites.adapter.conftest import ERA034


def _error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_backend_options_need_a_tree(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, ["memory", "scaling", "--backend", "FLASHINFER"])
    assert err == "harness: error: --backend and --list-backends need --vllm-src PATH"


def test_a_directory_without_vllm_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    err = _error(capsys, ["diff", "--base", str(tmp_path), "--head", str(ERA034)])
    assert "--base" in err and "no vllm/ directory here" in err
    err = _error(capsys, ["memory", "scaling", "--vllm-src", str(tmp_path / "x")])
    assert err.endswith("no such directory")


def test_an_unknown_backend_lists_the_trees(capsys: pytest.CaptureFixture[str]) -> None:
    err = _error(capsys, ["diff", "--base", str(ERA034), "--head", str(ERA034), "--backend", "X"])
    assert "unknown backend X; this tree has: FLASHMLA, FLASH_ATTN, TRITON_ATTN" in err


def test_bad_platform_and_step_options(capsys: pytest.CaptureFixture[str]) -> None:
    tree = str(ERA034)
    err = _error(capsys, ["diff", "--base", tree, "--head", tree, "--device-capability", "sm90"])
    assert "expected MAJOR.MINOR" in err
    err = _error(capsys, ["diff", "--base", tree, "--head", tree, "--steps", "0"])
    assert err.endswith("--steps must be positive, got 0")
    err = _error(capsys, ["memory", "scaling", "--vllm-src", tree, "--max-steps", "-1"])
    assert err.endswith("--max-steps must be positive, got -1")
