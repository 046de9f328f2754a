"""Inline suppression: ``# harness: ignore[CODE, ...]`` on a finding's line. :func:`apply` records
which codes each comment used, so rules can report bare and stale comments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from harness.overrides.findings import Finding

IGNORE_COMMENT = re.compile(r"#\s*harness:\s*ignore\b(?:\[([^\]]*)\])?")
"""A ``# harness: ignore[CODE, ...]`` comment, or a bare ``# harness: ignore`` (group 1: the
codes as written, ``None`` when bare): the one pattern that reads and strips them."""


class IgnoreComment(NamedTuple):
    """One ``# harness: ignore[...]`` comment, after suppression."""

    path: str
    line: int
    codes: tuple[str, ...]
    """The codes as written (empty for a bare ``# harness: ignore``)."""
    used: frozenset[str]
    """The codes (upper case) that suppressed a finding on the line."""


def apply(
    findings: Iterable[Finding], ignores: dict[str, tuple[tuple[int, tuple[str, ...]], ...]]
) -> tuple[list[Finding], list[IgnoreComment]]:
    """The findings no comment suppresses, and every comment with the codes it used."""
    by_line: dict[tuple[str, int], set[str]] = {}
    for path, comments in ignores.items():
        for line, codes in comments:
            by_line.setdefault((path, line), set()).update(c.upper() for c in codes)
    used: set[tuple[str, int, str]] = set()
    kept: list[Finding] = []
    for finding in findings:
        if finding.code in by_line.get((finding.path, finding.line), ()):
            used.add((finding.path, finding.line, finding.code))
        else:
            kept.append(finding)
    return kept, [
        IgnoreComment(
            path,
            line,
            codes,
            frozenset(c.upper() for c in codes if (path, line, c.upper()) in used),
        )
        for path, comments in ignores.items()
        for line, codes in comments
    ]
