"""suppress: codes on the finding's line suppress; bare and unused ignores are reported."""

from __future__ import annotations

from harness.overrides.findings import Finding, Severity
from harness.overrides.suppress import apply


def finding(line: int, code: str = "HO101") -> Finding:
    return Finding("a.py", line, 5, code, "renamed-parameter", Severity.ERROR, "m")


def test_matching_code_suppresses_and_others_are_reported() -> None:
    ignores = {"a.py": ((3, ("ho101",)), (5, ("HO102",)), (7, ()))}
    kept = apply([finding(3), finding(5), finding(7)], ignores, audit={"a.py"})
    assert sorted((f.line, f.code) for f in kept) == [
        (5, "HO101"),
        (5, "HO301"),
        (7, "HO101"),
        (7, "HO302"),
    ]


def test_partially_used_ignore_reports_only_the_unused_codes() -> None:
    kept = apply([finding(3)], {"a.py": ((3, ("HO101", "HO105")),)}, audit={"a.py"})
    assert [(f.code, f.message) for f in kept] == [
        ("HO301", "unused 'harness: ignore[HO105]' comment")
    ]


def test_unused_ignores_only_in_audited_files() -> None:
    assert apply([], {"a.py": ((3, ("HO101",)),)}, audit=set()) == []
