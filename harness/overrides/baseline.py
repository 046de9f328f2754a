"""Baselines: accept today's findings, fail only on new ones.

A finding's key is its rule code, the qualified class and method, and the drifted parameter
names (for file-level diagnostics: the path and a code-specific detail) — never its line or
column, so editing unrelated code does not resurface baselined drift, and a new drift of the
same kind in the same file (another method, another parameter) is not hidden. Keys are
counted, so a second identical finding beyond the baselined count is new.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from harness.errors import HarnessError
from harness.overrides.findings import Finding

VERSION = 1


def key(finding: Finding) -> str:
    """The stable identity of a finding."""
    if finding.class_name is not None:
        subject = finding.class_name + (f".{finding.method}" if finding.method else "")
        detail = ",".join(finding.params)
    else:
        subject = finding.path
        detail = finding.extra_key
    return f"{finding.code}:{subject}:{detail}"


def write(path: str | Path, findings: Iterable[Finding]) -> int:
    """Write a baseline of ``findings``; returns how many entries it holds."""
    keys = sorted(key(f) for f in findings)
    payload = {"version": VERSION, "tool": "harness overrides", "findings": keys}
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        raise HarnessError(f"cannot write baseline {path}: {exc.strerror}") from exc
    return len(keys)


def read(path: str | Path) -> Counter[str]:
    """The multiset of keys in a baseline file."""
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise HarnessError(f"cannot read baseline {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise HarnessError(f"baseline {path} is not valid JSON: {exc}") from exc
    if not isinstance(payload, dict) or payload.get("version") != VERSION:  # pyright: ignore[reportUnknownMemberType]
        raise HarnessError(f"baseline {path} is not a version-{VERSION} harness baseline")
    entries = payload.get("findings")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):  # pyright: ignore[reportUnknownVariableType]
        raise HarnessError(f"baseline {path}: 'findings' must be a list of strings")
    return Counter(str(e) for e in entries)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


def filter_new(findings: Iterable[Finding], baseline: Counter[str]) -> list[Finding]:
    """Findings not covered by ``baseline`` (each baselined key absorbs that many findings)."""
    remaining = Counter(baseline)
    out: list[Finding] = []
    for finding in findings:
        k = key(finding)
        if remaining[k] > 0:
            remaining[k] -= 1
            continue
        out.append(finding)
    return out
