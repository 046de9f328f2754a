"""The adapter's command lines: bad input is one line and exit 2 (no child process started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from suites.adapter.conftest import ERA034, ERA09


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
    assert "unknown backend X; the backends of the base and head trees: FLASHMLA, FLASH" in err


def test_bad_platform_and_step_options(capsys: pytest.CaptureFixture[str]) -> None:
    tree = str(ERA034)
    err = _error(capsys, ["diff", "--base", tree, "--head", tree, "--device-capability", "sm90"])
    assert "expected MAJOR.MINOR" in err
    err = _error(capsys, ["diff", "--base", tree, "--head", tree, "--steps", "0"])
    assert err.endswith("--steps must be positive, got 0")
    err = _error(capsys, ["memory", "scaling", "--vllm-src", tree, "--max-steps", "-1"])
    assert err.endswith("--max-steps must be positive, got -1")


def test_a_backend_only_one_tree_has_is_said_without_starting_a_child(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The base's list alone chose what diff compared: a backend the head added was never
    mentioned, and naming it failed with 'this tree has' (which tree?)."""
    argv = ["diff", "--base", str(ERA09), "--head", str(ERA034)]
    assert main([*argv, "--backend", "TRITON_ATTN"]) == 2
    captured = capsys.readouterr()
    assert "TRITON_ATTN: not compared: only " in captured.out
    assert "has it: there is no base to compare with" in captured.out
    assert captured.err.strip() == "harness: error: no backend could be compared on both trees"
    assert main([*argv, "--backend", "FLASHINFER"]) == 1
    out = capsys.readouterr().out
    assert "FLASHINFER: DIFFERENT: first difference at step 0, set-up:" in out
    assert f"head: {ERA034.resolve()} (vLLM 0.34.0+fixture) has no backend FLASHINFER" in out
