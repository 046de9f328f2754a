"""``harness hunt``: usage errors (devices, output directory, working directory, an empty tree)
are one line and exit 2 before any work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import harness.hunt.job
from harness.cli import main


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The hunt itself, replaced: a usage error must be raised before it is called."""
    calls: list[dict[str, Any]] = []

    def fake(path: Path | None = None, **kwargs: Any) -> harness.hunt.job.HuntReport:
        calls.append({"path": path, **kwargs})
        return harness.hunt.job.HuntReport(str(path), kwargs["devices"])

    monkeypatch.setattr(harness.hunt.job, "hunt", fake)
    return calls


def _one_line_usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: error: "), captured.err
    assert captured.out == ""
    return lines[0]


@pytest.mark.parametrize(
    ("devices", "says"),
    [
        ("", "no device"),
        (",", "empty device name"),
        ("  ", "no device"),
        ("h100-95,,b200", "empty device name"),
        ("h100-95,h100-95", "h100-95 twice"),
        ("h100-95, h100-95", "h100-95 twice"),
        ("h100-95,nope", "unknown device profile 'nope'"),
    ],
)
def test_bad_device_lists_are_usage_errors_before_any_work(
    devices: str,
    says: str,
    no_work: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    line = _one_line_usage_error(capsys, ["hunt", "--devices", devices, "--out", str(tmp_path)])
    assert says in line and "--devices" in line
    assert no_work == []


def test_a_good_device_list_reaches_the_hunt(no_work: list[dict[str, Any]], tmp_path: Path) -> None:
    assert main(["hunt", "--devices", " b200 ,h100-95", "--out", str(tmp_path / "r")]) == 0
    assert no_work[0]["devices"] == ("b200", "h100-95")
    assert (tmp_path / "r" / "hunt.json").is_file()


def test_an_output_that_cannot_be_a_directory_is_a_usage_error_before_any_work(
    no_work: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken = tmp_path / "taken.txt"
    taken.write_text("mine\n")
    line = _one_line_usage_error(capsys, ["hunt", "--out", str(taken)])
    assert "--out" in line and "not a directory" in line
    line = _one_line_usage_error(capsys, ["hunt", "--out", str(taken / "sub")])
    assert "not a directory" in line
    line = _one_line_usage_error(capsys, ["hunt", "--out", ""])  # an empty CI variable
    assert "--out is empty" in line
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "deeper")
    line = _one_line_usage_error(capsys, ["hunt", "--out", str(tmp_path / "dangling")])
    assert "is a symbolic link to nothing" in line
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").write_text("a file where the default report directory goes\n")
    line = _one_line_usage_error(capsys, ["hunt"])
    assert "reports" in line and "not a directory" in line
    assert no_work == [] and taken.read_text() == "mine\n"


def test_a_deleted_working_directory_is_a_usage_error(
    no_work: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    line = _one_line_usage_error(capsys, ["hunt", "--out", str(tmp_path)])
    assert "the working directory no longer exists" in line
    assert no_work == []


@pytest.mark.parametrize(
    ("files", "config"),
    [
        ({"README.md": "# no Python here\n"}, ""),
        ({"a.py": "class A:\n    pass\n"}, '[tool.harness.overrides]\nexclude = ["*"]\n'),
    ],
)
def test_a_tree_with_nothing_to_check_is_a_usage_error_unless_allowed(
    files: dict[str, str],
    config: str,
    no_work: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name, text in {**files, **({"pyproject.toml": config} if config else {})}.items():
        (tree / name).write_text(text)
    out = str(tmp_path / "reports")
    line = _one_line_usage_error(capsys, ["hunt", str(tree), "--out", out])
    assert "no Python file to check" in line and "--allow-empty" in line
    assert no_work == []
    assert main(["hunt", str(tree), "--out", out, "--allow-empty"]) == 0
    assert no_work[0]["allow_empty"] is True
