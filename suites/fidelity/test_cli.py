"""``harness fidelity``: the report, exit codes, and clear errors for bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.reference.block_table import BlockTable

from .conftest import FIXTURES

FAKE = str(FIXTURES / "fake_vllm")
ONLY = ["--only", "block-table-row-ops", "--only", "kv-cache-specs"]


def test_agreement_prints_the_table_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fidelity", "--vllm-src", FAKE, *ONLY, "--trials", "20"]) == 0
    out = capsys.readouterr().out
    assert "the reference vs vLLM 0.0.0+fake" in out
    assert "kv-cache-specs" in out and "20/20" in out and "agree" in out
    assert "every differential agrees (2 of 2; 40/40 trials)" in out


def test_a_disagreement_exits_1_with_a_minimal_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def swap_rows_only(self: BlockTable, src: int, tgt: int) -> None:  # forgets the row counts
        self.block_table_np[[src, tgt]] = self.block_table_np[[tgt, src]]

    monkeypatch.setattr(BlockTable, "swap_row", swap_rows_only)
    argv = ["fidelity", "--vllm-src", FAKE, "--only", "block-table-row-ops", "--trials", "40"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "DISAGREE" in out and "NOT in agreement: block-table-row-ops" in out
    assert "minimal disagreeing input" in out and "'swap'" in out
    assert "num_blocks_per_row" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--vllm-src", "/nonexistent"], "no such directory"),
        (["--vllm-src", str(FIXTURES)], "not a vLLM tree (no vllm/ directory here)"),
        (
            ["--vllm-src", FAKE, "--only", "nope"],
            "unknown differential 'nope'; available: kv-cache",
        ),
        (["--vllm-src", FAKE, "--only", "runner-inputs"], "missing"),  # the fake tree lacks it
        (["--vllm-src", FAKE, *ONLY, "--trials", "0"], "--trials must be positive"),
    ],
)
def test_bad_input_is_a_clear_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fidelity", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_tree_without_the_stubbed_helpers_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "vllm" / "v1"
    tree.mkdir(parents=True)
    fake = FIXTURES / "fake_vllm" / "vllm"
    shutil.copy(fake / "_version.py", tmp_path / "vllm")
    shutil.copy(fake / "v1" / "kv_cache_interface.py", tree)
    assert main(["fidelity", "--vllm-src", str(tmp_path), "--only", "kv-cache-specs"]) == 2
    err = capsys.readouterr().err
    assert "defines no cdiv under vllm/utils" in err and "Traceback" not in err


def test_a_source_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as excinfo:
        main(["fidelity"])
    assert excinfo.value.code == 2
    assert "--vllm-src" in capsys.readouterr().err
