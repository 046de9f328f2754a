"""baseline: keys never contain positions but do contain severity; counts matter; stale
entries are found with their lines; bad files are usage errors."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.errors import HarnessError
from harness.overrides.baseline import StaleEntry, filter_new, key, keys, read, stale, write
from harness.overrides.findings import Finding, Severity

DRIFT = Finding("a.py", 10, 5, "HO101", "renamed-parameter", Severity.WARNING, "m",
                class_name="pkg.a.B", method="f", params=("x", "y"))  # fmt: skip


def test_key_ignores_position_but_not_parameters() -> None:
    moved = dataclasses.replace(DRIFT, line=99, col=1, message="other text")
    assert key(moved) == key(DRIFT) == "HO101:warning:pkg.a.B.f:x,y"
    assert key(dataclasses.replace(DRIFT, params=("z", "zz"))) != key(DRIFT)
    assert key(dataclasses.replace(DRIFT, severity=Severity.ERROR)) != key(DRIFT)  # escalation


def test_round_trip_and_counts(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    assert write(path, [DRIFT]) == 1
    assert keys(read(path)) == Counter({key(DRIFT): 1})
    assert filter_new([DRIFT], keys(read(path))) == []
    assert filter_new([DRIFT, DRIFT], keys(read(path))) == [DRIFT]


def test_stale_entries_with_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    other = dataclasses.replace(DRIFT, params=("z", "zz"))
    write(path, [DRIFT, DRIFT, other])
    entries = read(path)
    lines = path.read_text().splitlines()
    assert all(key(DRIFT) in lines[e.line - 1] or key(other) in lines[e.line - 1] for e in entries)
    assert stale("b.json", entries, [DRIFT, other]) == [
        StaleEntry("b.json", entries[1].line, key(DRIFT))  # the second copy is unused
    ]
    assert stale("b.json", entries, [DRIFT, DRIFT, other]) == []


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        '{"version": 9}',
        '{"version": 2, "findings": [1]}',
        '{"version": 1, "findings": []}',
    ],
)
def test_bad_baseline_is_a_usage_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(HarnessError):
        read(path)
    with pytest.raises(HarnessError):
        read(tmp_path / "missing.json")


_PIPELINE_BASE = """
class Pipeline:
    def run(self, batch, *, guidance_scale=1.0):
        return batch

    def step(self):
        return self.run(1, guidance_scale=2.0)
"""
_PIPELINE = """
from sglang.srt.base import Pipeline


class DiffusersPipeline(Pipeline):
    def run(self, batch):
        return batch
"""


@pytest.mark.parametrize("marker", ["python/pyproject.toml", None])
def test_keys_do_not_depend_on_where_the_scan_starts(
    tmp_path: Path, overrides: Any, monkeypatch: pytest.MonkeyPatch, marker: str | None
) -> None:
    """``harness overrides .`` vs ``harness overrides pipelines`` vs ``cd pipelines &&
    harness overrides .``: one baseline (a folder without ``__init__.py`` beside the
    project's packages, whose base lives in a package the scan may leave out), with a
    project marker or none."""
    files = {
        "python/sglang/__init__.py": "",
        "python/sglang/srt/__init__.py": "",
        "python/sglang/srt/base.py": _PIPELINE_BASE,
        "python/pipelines/diffusers_pipeline.py": _PIPELINE,
    }
    if marker is not None:
        files[marker] = "[project]\nname = 'sglang'\n"
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    got = {}
    for cwd, scanned in [
        ("python", "."),
        ("python", "pipelines"),
        ("python/pipelines", "."),
        (".", "python"),
        (".", "python/pipelines"),
    ]:
        monkeypatch.chdir(tmp_path / cwd)
        out = tmp_path / "baseline.json"
        run = overrides("--isolated", "--write-baseline", out, scanned, cache=False)
        assert run.exit_code == 0, run
        got[(cwd, scanned)] = sorted(keys(read(out)))
    want = ["HO103:error:pipelines.diffusers_pipeline.DiffusersPipeline.run:guidance_scale"]
    assert got == dict.fromkeys(got, want)
