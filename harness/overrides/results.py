"""Cache of whole-run results, for re-running on an unchanged tree.

A run is identified by its inputs (roots, changed files, optional rules, checker version) and
fingerprinted by every file's path, mtime and size. When both match a stored entry, the
stored findings are returned without loading any summary: the pre-commit / CI re-run of an
unchanged tree costs a directory walk and a few ``stat`` calls.
"""

from __future__ import annotations

import hashlib
import marshal
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.overrides.findings import Evidence, Finding, Severity

SCHEMA = 1
_FILE = "results.marshal"
_MAX_RUNS = 32


def fingerprint(entries: Sequence[tuple[str, int, int]], extra: Sequence[str]) -> bytes:
    """Digest of ``(path, mtime_ns, size)`` of every file plus other run-relevant strings."""
    return hashlib.blake2b(marshal.dumps((tuple(entries), tuple(extra))), digest_size=20).digest()


def run_key(parts: Sequence[str | None]) -> bytes:
    """Digest of the run's inputs."""
    return hashlib.blake2b(marshal.dumps(tuple(parts)), digest_size=20).digest()


def _encode(f: Finding) -> tuple[Any, ...]:
    ev = f.evidence
    evidence = (
        None
        if ev is None
        else (ev.path, ev.line, ev.col, ev.text, ev.error, ev.receiver, ev.unreached)
    )
    return (
        f.path, f.line, f.col, f.code, f.symbol, f.severity.value, f.message, f.class_name,
        f.method, f.base_class, f.base_path, f.base_line, f.params, f.signature,
        f.base_signature, evidence, f.extra_key,
    )  # fmt: skip


def _decode(raw: Any) -> Finding:
    ev = raw[15]
    return Finding(
        path=raw[0],
        line=raw[1],
        col=raw[2],
        code=raw[3],
        symbol=raw[4],
        severity=Severity(raw[5]),
        message=raw[6],
        class_name=raw[7],
        method=raw[8],
        base_class=raw[9],
        base_path=raw[10],
        base_line=raw[11],
        params=tuple(raw[12]),
        signature=raw[13],
        base_signature=raw[14],
        evidence=None if ev is None else Evidence(*ev),
        extra_key=raw[16],
    )


class ResultStore:
    """Stored findings by run key."""

    def __init__(self, directory: str | None) -> None:
        self.path = None if directory is None else Path(directory) / _FILE
        self.runs: dict[bytes, tuple[bytes, Any]] = {}
        if self.path is None:
            return
        try:
            payload: Any = marshal.loads(self.path.read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            return
        if isinstance(payload, tuple) and len(payload) == 2 and payload[0] == SCHEMA:  # pyright: ignore[reportUnknownArgumentType]
            self.runs = payload[1]

    def get(self, key: bytes, print_: bytes) -> list[Finding] | None:
        """The stored findings of ``key`` if its fingerprint is ``print_``."""
        entry = self.runs.get(key)
        if entry is None or entry[0] != print_:
            return None
        try:
            return [_decode(raw) for raw in entry[1]]
        except (TypeError, ValueError, IndexError):
            return None

    def put(self, key: bytes, print_: bytes, findings: Sequence[Finding]) -> None:
        """Store a run's findings (atomically; write failures are ignored)."""
        if self.path is None:
            return
        self.runs.pop(key, None)
        self.runs[key] = (print_, tuple(_encode(f) for f in findings))
        while len(self.runs) > _MAX_RUNS:
            del self.runs[next(iter(self.runs))]
        tmp = self.path.with_name(f".{_FILE}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(marshal.dumps((SCHEMA, self.runs)))
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)
