"""Baselines: accept today's findings, fail only on new ones.

A finding's key is its rule code, severity, class, method and drifted parameter names, never its
line; keys are counted, so a second identical finding is new. Entries no finding uses are stale:
a whole-tree run reports them and ``--write-baseline`` drops them.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from harness.errors import HarnessError
from harness.overrides.findings import Finding

VERSION = 2
"""Version 2 keys carry the severity; version 1 baselines must be written again."""


class Entry(NamedTuple):
    """One key of a baseline file, and the line it is written on."""

    key: str
    line: int


class StaleEntry(NamedTuple):
    """A baseline entry that no current finding matches."""

    path: str
    """The baseline file, as given."""
    line: int
    key: str


def key(finding: Finding) -> str:
    """The stable identity of a finding."""
    if finding.class_name is not None:
        subject = finding.class_name + (f".{finding.method}" if finding.method else "")
        detail = ",".join(finding.params)
    else:
        subject = finding.path
        detail = finding.extra_key
    return f"{finding.code}:{finding.severity.value}:{subject}:{detail}"


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


def read(path: str | Path) -> list[Entry]:
    """The entries of a baseline file, each with its line (1 if it cannot be told)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise HarnessError(f"cannot read baseline {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise HarnessError(f"baseline {path} is not UTF-8 text: {exc.reason}") from exc
    try:
        payload = json.loads(text)
    except ValueError as exc:
        raise HarnessError(f"baseline {path} is not valid JSON: {exc}") from exc
    version = payload.get("version") if isinstance(payload, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if version == 1:
        raise HarnessError(
            f"baseline {path} is a version-1 baseline, whose keys lack the severity; "
            "write it again with --write-baseline"
        )
    if not isinstance(payload, dict) or version != VERSION:
        raise HarnessError(f"baseline {path} is not a version-{VERSION} harness baseline")
    entries = payload.get("findings")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):  # pyright: ignore[reportUnknownVariableType]
        raise HarnessError(f"baseline {path}: 'findings' must be a list of strings")
    lines: dict[str, list[int]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        item = line.strip().rstrip(",")
        if item.startswith('"') and item.endswith('"'):
            try:
                value = json.loads(item)
            except ValueError:
                continue
            lines.setdefault(str(value), []).append(number)
    return [
        Entry(str(e), found.pop(0) if (found := lines.get(str(e))) else 1)  # pyright: ignore[reportUnknownArgumentType]
        for e in entries  # pyright: ignore[reportUnknownVariableType]
    ]


def keys(entries: Iterable[Entry]) -> Counter[str]:
    """The multiset of keys."""
    return Counter(e.key for e in entries)


def filter_new(findings: Iterable[Finding], baseline: Counter[str]) -> list[Finding]:
    """Findings not covered by ``baseline`` (each baselined key absorbs that many findings)."""
    remaining = Counter(baseline)
    out: list[Finding] = []
    for finding in findings:
        k = key(finding)
        remaining[k] -= 1
        if remaining[k] < 0:
            out.append(finding)
    return out


def stale(path: str, entries: list[Entry], findings: Iterable[Finding]) -> list[StaleEntry]:
    """The entries of the baseline at ``path`` that ``findings`` leave unused."""
    unused = keys(entries)
    unused.subtract(key(f) for f in findings)
    out: list[StaleEntry] = []
    for entry in reversed(entries):  # the last copies of a key are the unused ones
        if unused[entry.key] > 0:
            unused[entry.key] -= 1
            out.append(StaleEntry(path, entry.line, entry.key))
    return out[::-1]
