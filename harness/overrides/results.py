"""Cache of whole-run results, for re-running on an unchanged tree.

A run is identified by its inputs (roots, changed files, optional rules, checker version) and
fingerprinted by every file's path and content hash. When both match a stored entry, the
stored findings are returned without loading any summary: the pre-commit / CI re-run of an
unchanged tree costs a directory walk and reading the files once.
"""

from __future__ import annotations

import hashlib
import marshal
from collections.abc import Sequence
from typing import Any

from harness.overrides.cache import digest, read_framed, write_framed
from harness.overrides.findings import Evidence, Finding, Severity

SCHEMA = 3
_FILE = "results.bin"
_MAX_RUNS = 32
_HEADER = ("harness-overrides-results", SCHEMA)


def fingerprint(entries: Sequence[tuple[str, str]], extra: Sequence[str]) -> bytes:
    """Digest of ``(path, content hash)`` of every file plus other run-relevant strings."""
    return hashlib.blake2b(marshal.dumps((tuple(entries), tuple(extra))), digest_size=20).digest()


def run_key(parts: Sequence[str | None]) -> bytes:
    """Digest of the run's inputs."""
    return hashlib.blake2b(marshal.dumps(tuple(parts)), digest_size=20).digest()


def _encode(f: Finding) -> tuple[Any, ...]:
    ev = f.evidence
    evidence = (
        None
        if ev is None
        else (ev.path, ev.line, ev.col, ev.text, ev.error, ev.receiver, ev.unreached, ev.via)
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


def _is_run_table(payload: Any) -> bool:
    return isinstance(payload, dict) and all(
        isinstance(k, bytes) and isinstance(v, tuple) and len(v) == 3 and isinstance(v[0], bytes)  # pyright: ignore[reportUnknownArgumentType]
        for k, v in payload.items()  # pyright: ignore[reportUnknownVariableType]
    )


def _unchanged(path: str, hashed: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return digest(handle.read()) == hashed
    except OSError:
        return False


class ResultStore:
    """Stored findings by run key."""

    def __init__(self, directory: str | None) -> None:
        self.directory = directory
        self.runs: dict[bytes, tuple[bytes, Any, Any]] = {}
        if directory is not None:
            payload = read_framed(directory, _FILE, _HEADER, _is_run_table)
            if payload is not None:
                self.runs = payload

    def get(self, key: bytes, print_: bytes) -> list[Finding] | None:
        """The stored findings of ``key`` if its fingerprint is ``print_`` and the files it
        read from outside the tree still have the content they had."""
        entry = self.runs.get(key)
        if entry is None or entry[0] != print_:
            return None
        try:
            if not all(_unchanged(path, hashed) for path, hashed in entry[2]):
                return None
            return [_decode(raw) for raw in entry[1]]
        except Exception:  # a stored entry of the wrong shape is a miss, whatever it raises
            return None

    def put(
        self,
        key: bytes,
        print_: bytes,
        findings: Sequence[Finding],
        outside: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Store a run's findings (atomically; write failures are ignored), with the
        ``(path, content hash)`` of the files it read from outside the tree."""
        if self.directory is None:
            return
        self.runs.pop(key, None)
        self.runs[key] = (print_, tuple(_encode(f) for f in findings), tuple(outside))
        while len(self.runs) > _MAX_RUNS:
            del self.runs[next(iter(self.runs))]
        write_framed(self.directory, _FILE, _HEADER, self.runs)
