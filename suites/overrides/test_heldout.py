"""The held-out drift corpus (``scripts/heldout_overrides/``), one test per case.

A line ending in ``# drift`` must carry a drift finding (HO1xx, any severity); a ``*_clean_*``
case must give none. Cases the checker is known to miss are strict xfails: catching one turns the
test red until the entry below is removed, so the recorded recall never goes stale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

CORPUS = Path(__file__).resolve().parents[2] / "scripts" / "heldout_overrides"
KNOWN_MISSES = {
    "c37_assigned_method": "a base method bound by assignment (reset = _reset) is not read as a method",
}


def _cases() -> list[Path]:
    return sorted(p for p in CORPUS.iterdir() if p.name.startswith("c") and p.name[1:3].isdigit())


def _marked(case: Path) -> set[tuple[str, int]]:
    files = [case] if case.is_file() else sorted(case.rglob("*.py"))
    return {
        (file.relative_to(CORPUS).as_posix(), number)
        for file in files
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1)
        if line.rstrip().endswith("# drift")
    }


def _params() -> list[Any]:
    marks = {name: pytest.mark.xfail(reason=why, strict=True) for name, why in KNOWN_MISSES.items()}
    return [
        pytest.param(case, id=case.name.removesuffix(".py"), marks=marks.get(case.stem, ()))
        for case in _cases()
    ]


def test_corpus_is_not_empty() -> None:
    cases = _cases()
    assert len(cases) >= 50, cases
    names = {case.name.removesuffix(".py") for case in cases}
    assert set(KNOWN_MISSES) <= names, set(KNOWN_MISSES) - names


@pytest.mark.parametrize("case", _params())
def test_heldout_case(case: Path, overrides: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CORPUS)
    findings = overrides.json("--isolated", case.name, cache=False)
    reported = {(f["path"], f["line"]) for f in findings if f["code"].startswith("HO1")}
    want = _marked(case)
    if "_clean_" in case.name:
        assert not want, f"{case.name}: a clean case marks no line"
        assert not reported, f"{case.name}: findings on a clean case: {findings}"
    else:
        assert want, f"{case.name}: a drift case marks at least one '# drift' line"
        assert want <= reported, f"{case.name}: missed {sorted(want - reported)}; got {findings}"
