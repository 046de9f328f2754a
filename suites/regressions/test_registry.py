"""The catalog registry: built-ins, register_regression, the entry-point group."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.regressions import (
    ENTRY_POINT_GROUP,
    REGRESSIONS,
    Regression,
    available_regressions,
    get_regression,
    register_regression,
    registry,
    unregister_regression,
)

from .variants import entry

BUILT_IN = {
    "aiter-build-decode-rename": {17483, 17961},
    "flashinfer-global-config": {17483, 18086},
    "flashinfer-oom": {17483},
    "aiter-mla-last-page-len": {31282, 38146},
    "cascade-prefix-schedule": {17276, 17283},
    "dummy-run-null-block": {25954, 39444},
}


def test_built_in_entries_with_their_references() -> None:
    assert set(BUILT_IN) <= set(available_regressions())
    for regression_id, numbers in BUILT_IN.items():
        regression = REGRESSIONS[regression_id]
        assert {u.number for u in regression.upstream} == numbers
        assert regression.checks and regression.bug_class and regression.component
        assert regression.found_upstream and regression.caught_by and regression.doc
        assert all(str(n) in regression.doc for n in numbers)  # the story cites them too


def test_unknown_id_lists_the_available_ones() -> None:
    with pytest.raises(HarnessError, match=r"unknown regression 'nope'; available: aiter-build"):
        get_regression("nope")


@pytest.mark.usefixtures("fresh_registry")
def test_register_then_duplicate_is_loud() -> None:
    mine = register_regression(entry("my-bug"))
    assert get_regression("my-bug") is mine
    with pytest.raises(HarnessError, match=r"duplicate regression id 'my-bug'.*register_regr"):
        register_regression(entry("my-bug"))
    with pytest.raises(HarnessError, match=r"duplicate regression id 'flashinfer-oom'.*built"):
        register_regression(entry("flashinfer-oom"), origin="built")
    unregister_regression("my-bug")
    assert "my-bug" not in available_regressions()
    with pytest.raises(HarnessError, match="built in"):
        unregister_regression("flashinfer-oom")


def test_ids_are_kebab_case_and_checks_required() -> None:
    with pytest.raises(HarnessError, match="kebab-case"):
        entry("My Bug")
    with pytest.raises(HarnessError, match="two checks with one name"):
        from harness.regressions import Check

        from .variants import never_fires

        entry("x", Check("a", "", never_fires), Check("a", "", never_fires))


def _entry_points(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, source: str, value: str) -> None:
    (tmp_path / "plugin_mod.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "plugin_mod", raising=False)
    point = importlib.metadata.EntryPoint(name="plugin", value=value, group=ENTRY_POINT_GROUP)

    def entry_points(*, group: str) -> list[importlib.metadata.EntryPoint]:
        return [point] if group == ENTRY_POINT_GROUP else []

    monkeypatch.setattr(registry.importlib.metadata, "entry_points", entry_points)


PLUGIN = """
from suites.regressions.variants import entry
ONE = entry("plugin-bug")
MANY = [entry("plugin-a"), entry("plugin-b")]
CLASH = entry("flashinfer-oom")
NOT_AN_ENTRY = 42
"""


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("attr", "ids"), [("ONE", {"plugin-bug"}), ("MANY", {"plugin-a", "plugin-b"})]
)
def test_entry_point_group_adds_installed_entries(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, attr: str, ids: set[str]
) -> None:
    _entry_points(monkeypatch, tmp_path, PLUGIN, f"plugin_mod:{attr}")
    assert ids <= set(available_regressions())
    assert isinstance(get_regression(sorted(ids)[0]), Regression)


@pytest.mark.usefixtures("fresh_registry")
@pytest.mark.parametrize(
    ("value", "error"),
    [
        (
            "plugin_mod:CLASH",
            r"duplicate regression id 'flashinfer-oom': from entry point 'plugin'",
        ),
        ("plugin_mod:NOT_AN_ENTRY", r"entry point 'plugin' \(plugin_mod:NOT_AN_ENTRY\) gave int"),
        ("plugin_mod:MISSING", r"entry point 'plugin' \(plugin_mod:MISSING\) failed to load"),
    ],
)
def test_a_bad_entry_point_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, error: str
) -> None:
    _entry_points(monkeypatch, tmp_path, PLUGIN, value)
    with pytest.raises(HarnessError, match=error):
        available_regressions()
    with pytest.raises(HarnessError, match=error):  # again: no partial catalog was left behind
        get_regression("flashinfer-oom")
