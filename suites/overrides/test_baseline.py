"""baseline: keys never contain positions; counts matter; bad files are usage errors."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.overrides.baseline import filter_new, key, read, write
from harness.overrides.findings import Finding, Severity

DRIFT = Finding("a.py", 10, 5, "HO101", "renamed-parameter", Severity.WARNING, "m",
                class_name="pkg.a.B", method="f", params=("x", "y"))  # fmt: skip


def test_key_ignores_position_but_not_parameters() -> None:
    moved = dataclasses.replace(DRIFT, line=99, col=1, message="other text")
    assert key(moved) == key(DRIFT) == "HO101:pkg.a.B.f:x,y"
    assert key(dataclasses.replace(DRIFT, params=("z", "zz"))) != key(DRIFT)


def test_round_trip_and_counts(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    assert write(path, [DRIFT]) == 1
    assert read(path) == Counter({key(DRIFT): 1})
    assert filter_new([DRIFT], read(path)) == []
    assert filter_new([DRIFT, DRIFT], read(path)) == [DRIFT]


@pytest.mark.parametrize(
    "content", ["not json", '{"version": 9}', '{"version": 1, "findings": [1]}']
)
def test_bad_baseline_is_a_usage_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(content)
    with pytest.raises(HarnessError):
        read(path)
    with pytest.raises(HarnessError):
        read(tmp_path / "missing.json")
