"""Inline suppression: ``# harness: ignore[CODE, ...]`` on the line a finding is reported on.

A bare ``# harness: ignore`` suppresses nothing and is reported (HO302); an ignore whose
codes match no finding on its line is reported (HO301), so stale suppressions cannot hide
the next real problem.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.overrides.findings import Finding, Severity
from harness.overrides.rules import RULES

_UNSUPPRESSIBLE = frozenset({"HO301", "HO302"})


def apply(
    findings: Iterable[Finding],
    ignores: dict[str, tuple[tuple[int, tuple[str, ...]], ...]],
    *,
    audit: frozenset[str] | set[str],
) -> list[Finding]:
    """Drop suppressed findings; add HO301/HO302 for ignores in the ``audit`` paths.

    ``ignores`` maps a display path to its ``(line, codes)`` comments. Only paths in
    ``audit`` (whose every class was checked) can report unused ignores.
    """
    by_line: dict[tuple[str, int], set[str]] = {}
    for path, comments in ignores.items():
        for line, codes in comments:
            by_line.setdefault((path, line), set()).update(c.upper() for c in codes)
    used: set[tuple[str, int, str]] = set()
    kept: list[Finding] = []
    for finding in findings:
        wanted = by_line.get((finding.path, finding.line))
        if wanted and finding.code in wanted and finding.code not in _UNSUPPRESSIBLE:
            used.add((finding.path, finding.line, finding.code))
            continue
        kept.append(finding)
    for path, comments in ignores.items():
        if path not in audit:
            continue
        for line, codes in comments:
            if not codes:
                kept.append(_diagnostic(path, line, "HO302", {}, "bare"))
                continue
            unused = [c for c in codes if (path, line, c.upper()) not in used]
            if unused:
                joined = ",".join(unused)
                kept.append(_diagnostic(path, line, "HO301", {"codes": joined}, joined))
    return kept


def _diagnostic(path: str, line: int, code: str, fields: dict[str, str], key: str) -> Finding:
    rule = RULES[code]
    return Finding(
        path=path,
        line=line,
        col=1,
        code=code,
        symbol=rule.symbol,
        severity=Severity.WARNING,
        message=rule.format(fields),
        extra_key=key,
    )
