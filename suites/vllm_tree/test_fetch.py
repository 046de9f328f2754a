"""A released vLLM's sources: the wheel fetched with pip and unpacked once into the cache."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from harness.errors import HarnessError
from harness.vllm_tree import fetch as fetch_module
from harness.vllm_tree.fetch import MARKER, fetch_vllm_source


def _fake_pip(version: str, calls: list[list[str]], *, wheel_version: str | None = None) -> Any:
    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        target = Path(command[command.index("-d") + 1])
        target.mkdir(parents=True)
        with zipfile.ZipFile(target / f"vllm-{version}-cp38-abi3-manylinux1_x86_64.whl", "w") as z:
            z.writestr(
                "vllm/_version.py", f"__version__ = version = '{wheel_version or version}'\n"
            )
            z.writestr("vllm/v1/kv_cache_interface.py", "X = 1\n")
            z.writestr("vllm/_C.abi3.so", b"\0")  # not Python: left out
            z.writestr("vllm-0.9.0.dist-info/METADATA", "")
            z.writestr("vllm/../escape.py", "")  # never written outside the tree
        return subprocess.CompletedProcess(command, 0, "", "")

    return run


def test_fetch_unpacks_python_sources_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(fetch_module.subprocess, "run", _fake_pip("0.9.0", calls))
    fetched = fetch_vllm_source("0.9.0", tmp_path)
    assert fetched.root == tmp_path / "vllm-0.9.0" and fetched.version == "0.9.0"
    assert "vllm==0.9.0" in calls[0] and "--no-deps" in calls[0]
    files = sorted(p.relative_to(fetched.root).as_posix() for p in fetched.root.rglob("*"))
    assert files == [
        MARKER,
        "vllm",
        "vllm/_version.py",
        "vllm/v1",
        "vllm/v1/kv_cache_interface.py",
    ]
    assert fetch_vllm_source("0.9.0", tmp_path) == fetched and len(calls) == 1  # cached


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_directory_we_did_not_create_is_never_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--cache-dir .`` beside an extracted sdist named ``vllm-0.9.0``: refused, left as it was."""
    calls: list[list[str]] = []
    monkeypatch.setattr(fetch_module.subprocess, "run", _fake_pip("0.9.0", calls))
    theirs = tmp_path / "vllm-0.9.0"
    (theirs / "vllm").mkdir(parents=True)
    (theirs / "vllm" / "mine.py").write_text("edited by hand\n")
    (theirs / "setup.py").write_text("")
    before = _tree(tmp_path)
    with pytest.raises(HarnessError, match=r"vllm-0\.9\.0 exists and is not an unpack of ours"):
        fetch_vllm_source("0.9.0", tmp_path)
    assert _tree(tmp_path) == before and calls == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vllm-0.9.0"]


def test_an_interrupted_unpack_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(fetch_module.subprocess, "run", _fake_pip("0.9.0", calls))

    def interrupted(wheel: Path, target: Path) -> int:
        (target / "vllm").mkdir(parents=True)
        (target / "vllm" / "half.py").write_text("")
        raise KeyboardInterrupt

    monkeypatch.setattr(fetch_module, "_unpack_python_sources", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fetch_vllm_source("0.9.0", tmp_path)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    monkeypatch.setattr(fetch_module.subprocess, "run", _fake_pip("0.9.0", calls))
    assert (fetch_vllm_source("0.9.0", tmp_path).root / MARKER).is_file()


def test_a_concurrent_unpack_that_finished_first_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two fetches at once: the one that renames second finds a complete tree and uses it."""
    calls: list[list[str]] = []
    fake = _fake_pip("0.9.0", calls)

    def racing(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        done = fake(command, **kwargs)
        if len(calls) == 1:  # the other process finishes while this one downloads
            other = tmp_path / "vllm-0.9.0"
            (other / "vllm").mkdir(parents=True)
            (other / "vllm" / "_version.py").write_text("__version__ = '0.9.0'\n")
            (other / "vllm" / "theirs.py").write_text("")
            (other / MARKER).write_text("{}\n")
        return done

    monkeypatch.setattr(fetch_module.subprocess, "run", racing)
    fetched = fetch_vllm_source("0.9.0", tmp_path)
    assert fetched.root == (tmp_path / "vllm-0.9.0").resolve() and fetched.version == "0.9.0"
    assert (fetched.root / "vllm" / "theirs.py").is_file()  # theirs was kept, not replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vllm-0.9.0"]


def test_pip_runs_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``-I``: a ``pip.py`` or ``ast.py`` in the working directory is never imported."""
    calls: list[list[str]] = []
    monkeypatch.setattr(fetch_module.subprocess, "run", _fake_pip("0.9.0", calls))
    fetch_vllm_source("0.9.0", tmp_path)
    assert calls[0][1:4] == ["-I", "-m", "pip"]


def test_fetch_failures_are_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(
        fetch_module.subprocess, "run", _fake_pip("0.9.0", calls, wheel_version="0.9.1")
    )
    with pytest.raises(HarnessError, match=r"the vllm==0\.9\.0 wheel says it is vLLM 0\.9\.1"):
        fetch_vllm_source("0.9.0", tmp_path)
    assert not (tmp_path / "vllm-0.9.0").exists()

    def failing(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution\n")

    monkeypatch.setattr(fetch_module.subprocess, "run", failing)
    with pytest.raises(HarnessError, match=r"could not download vllm==9\.9\.9 .*No matching"):
        fetch_vllm_source("9.9.9", tmp_path)
