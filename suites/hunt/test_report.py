"""The hunt's files: JSON, Markdown and the plots; and the CLI's exit codes (on canned reports)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import harness.hunt.job
from harness.cli import main
from harness.hunt.job import HuntReport, Row
from harness.hunt.report import to_markdown, verdict_line, write_reports


def _report(*rows: Row) -> HuntReport:
    return HuntReport("tree", ("h100-95",), list(rows), seconds=1.0)


def test_files_and_markdown(tmp_path: Path) -> None:
    report = _report(Row("overrides", "tree", "pass", "pass", "a | b", 0.1))
    written = write_reports(report, tmp_path / "reports")
    assert [p.name for p in written] == ["hunt.md", "hunt.json"]
    data = json.loads((tmp_path / "reports" / "hunt.json").read_text())
    assert data["ok"] is True and data["rows"][0]["check"] == "tree"
    assert "| overrides | tree | pass | pass | 0.1 | a \\| b |" in to_markdown(report, {})


@pytest.mark.parametrize(
    ("row", "code"),
    [
        (Row("catalog", "x", "pass", "pass", "", 0.0), 0),
        (Row("catalog", "x", "FAIL", "pass", "", 0.0), 1),
        (Row("overrides", "t", "FAIL", "pass", "", 0.0, crash=True), 1),
    ],
)
def test_cli_exit_code_and_summary(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    row: Row,
    code: int,
) -> None:
    monkeypatch.setattr(harness.hunt.job, "hunt", lambda *a, **k: _report(row))
    assert main(["hunt", "--out", str(tmp_path)]) == code
    out = capsys.readouterr().out
    assert "harness hunt: tree" in out and ("OK:" in out) == (code == 0)
    assert (tmp_path / "hunt.md").exists() and (tmp_path / "hunt.json").exists()


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["hunt", str(tmp_path / "missing")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert main(["hunt", "--devices", "h100-96", "--quick", "--out", str(tmp_path)]) == 2
    assert "unknown device profile 'h100-96' (available: a100-40" in capsys.readouterr().err


def test_the_verdict_names_the_tree_that_holds_the_crash() -> None:
    """With ``--vllm-src`` the crash may be in the vLLM tree while the reference is clean: the
    verdict line named the hunt's own PATH whatever row held the crash."""
    report = _report(
        Row("overrides", "tree", "pass", "pass", "", 0.0),
        Row("overrides", "/src/vllm", "FAIL", "pass", "", 0.0, crash=True),
        Row("scaling", "vLLM X FLEX", "FAIL", "pass", "", 0.0),
    )
    assert verdict_line(report) == (
        "FAILED: proven crash(es) in /src/vllm; 2 check(s) misbehaved: overrides /src/vllm, "
        "scaling vLLM X FLEX"
    )
