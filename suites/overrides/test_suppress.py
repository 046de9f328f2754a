"""suppress: codes on the finding's line suppress; each comment records the codes it used."""

from __future__ import annotations

from harness.overrides.findings import Finding, Severity
from harness.overrides.suppress import IgnoreComment, apply


def finding(line: int, code: str = "HO101") -> Finding:
    return Finding("a.py", line, 5, code, "renamed-parameter", Severity.ERROR, "m")


def test_matching_code_suppresses_and_comments_record_what_they_used() -> None:
    ignores = {"a.py": ((3, ("ho101",)), (5, ("HO102",)), (7, ()))}
    kept, comments = apply([finding(3), finding(5), finding(7)], ignores)
    assert sorted(f.line for f in kept) == [5, 7]
    assert comments == [
        IgnoreComment("a.py", 3, ("ho101",), frozenset({"HO101"})),
        IgnoreComment("a.py", 5, ("HO102",), frozenset()),
        IgnoreComment("a.py", 7, (), frozenset()),
    ]


def test_partially_used_ignore() -> None:
    kept, (comment,) = apply([finding(3)], {"a.py": ((3, ("HO101", "HO105")),)})
    assert kept == [] and comment.used == {"HO101"}
