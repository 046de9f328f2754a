"""GoldenStore: explicit update, diff on mismatch, obtained file, owner, deterministic rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.golden import GoldenMismatch, GoldenOutcome, GoldenStore, parse, render

OWNER = "suites/test_x.py::test_owner"


def test_missing_golden_fails_without_update(tmp_path: Path) -> None:
    store = GoldenStore(tmp_path, regenerate_hint="REGEN")
    with pytest.raises(GoldenMismatch, match=r"(?s)does not exist.*REGEN"):
        store.check("area/name", {"a": 1}, test=OWNER)
    assert not (tmp_path / "area/name.json").exists()
    assert (tmp_path / "area/name.obtained.json").exists()


def test_update_creates_then_matches_then_updates(tmp_path: Path) -> None:
    writer = GoldenStore(tmp_path, update=True)
    assert writer.check("x", {"b": [1, 2], "a": 0.1234567891}, test=OWNER) is GoldenOutcome.CREATED
    reader = GoldenStore(tmp_path)
    assert reader.check("x", {"a": 0.1234567891, "b": [1, 2]}, test=OWNER) is GoldenOutcome.MATCHED
    with pytest.raises(GoldenMismatch, match=r"(?s)-\s+2\n.*\+\s+3"):
        reader.check("x", {"a": 0.1234567891, "b": [1, 3]}, test=OWNER)
    assert (tmp_path / "x.obtained.json").exists()
    assert writer.check("x", {"a": 0.1234567891, "b": [1, 3]}, test=OWNER) is GoldenOutcome.UPDATED
    assert not (tmp_path / "x.obtained.json").exists()


def test_the_file_records_its_owner_and_another_test_is_refused(tmp_path: Path) -> None:
    GoldenStore(tmp_path, update=True).check("x", {"a": 1}, test=OWNER)
    assert GoldenStore(tmp_path).scan().owners["x"] == OWNER
    with pytest.raises(GoldenMismatch, match=rf"data match but it belongs to {OWNER}.*REGEN"):
        GoldenStore(tmp_path, regenerate_hint="REGEN").check("x", {"a": 1}, test="t.py::other")


def test_a_format_1_file_has_no_owner(tmp_path: Path) -> None:
    header = {"format": 1, "generator": "harness 0.1.0", "vllm_version": "0.9.0"}
    (tmp_path / "old.json").write_text(json.dumps({"data": {"a": 1}, "header": header}))
    assert GoldenStore(tmp_path).scan().owners["old"] is None
    with pytest.raises(GoldenMismatch, match=r"records no owning test \(format 1\)"):
        GoldenStore(tmp_path).check("old", {"a": 1}, test=OWNER)


def test_render_is_sorted_versioned_and_rounded() -> None:
    text = render({"z": 1, "a": 1 / 3}, test=OWNER, header={"vllm_version": "0.9.0"})
    assert text.index('"a"') < text.index('"z"')
    assert '"vllm_version": "0.9.0"' in text  # the project's own field
    assert "vllm_deviations" not in render({}, test=OWNER)  # none by default
    assert "0.333333," in text or "0.333333\n" in text
    assert text.endswith("\n")
    assert parse(text).test == OWNER


def test_header_fields_cannot_take_the_stores_own_names() -> None:
    with pytest.raises(ValueError, match="test are the store's own"):
        render({}, test=OWNER, header={"test": "mine"})


def test_names_skip_obtained_files(tmp_path: Path) -> None:
    store = GoldenStore(tmp_path, update=True)
    store.check("b/two", 2, test=OWNER)
    store.check("a", 1, test=OWNER)
    with pytest.raises(GoldenMismatch):
        GoldenStore(tmp_path).check("a", 3, test=OWNER)
    assert list(store.scan().owners) == ["a", "b/two"]


def test_bad_name_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="bad golden name"):
        GoldenStore(tmp_path).check("../escape", {}, test=OWNER)
