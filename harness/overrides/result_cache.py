"""Cache of whole-run results: a run identified by its inputs and fingerprinted by every file's path
and content hash returns the stored findings without loading any summary.
"""

from __future__ import annotations

import hashlib
import marshal
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from harness.overrides.cache import digest, read_framed, write_framed
from harness.overrides.findings import Difference, Evidence, Finding, Severity

SCHEMA = 4
_FILE = "results.bin"
_MAX_RUNS = 32
_HEADER = ("harness-overrides-results", SCHEMA)


def fingerprint(*parts: Any) -> bytes:
    """Digest of marshallable ``parts``: a run's inputs (its key), or every file's ``(path,
    content hash, module names...)`` and the unreadable paths (what the run saw)."""
    return hashlib.blake2b(marshal.dumps(parts), digest_size=20).digest()


def _encode(f: Finding) -> tuple[Any, ...]:
    """``f`` as nested tuples of builtins, field by field (``dataclasses.astuple`` deep-copies
    every value: tens of times slower, on every run that stores its findings)."""
    ev = f.evidence
    evidence: tuple[Any, ...] | None = None
    if ev is not None:
        evidence = (ev.path, ev.line, ev.col, ev.text, ev.error, ev.receiver, ev.unreached)
        evidence += (ev.via, ev.untyped, ev.guards)
    differences = tuple((d.code, d.symbol, d.message, d.params) for d in f.differences)
    return (
        f.path, f.line, f.col, f.code, f.symbol, f.severity.value, f.message, f.class_name,
        f.method, f.base_class, f.base_path, f.base_line, f.params, f.signature,
        f.base_signature, evidence, differences, f.extra_key,
    )  # fmt: skip


_S, _I, _NS, _NI = str, int, (str, type(None)), (int, type(None))
_FINDING = (_S, _I, _I, _S, _S, _S, _S, _NS, _NS, _NS, _NS, _NI, tuple, _NS, _NS, object, tuple, _S)
_EVIDENCE = (_S, _I, _I, _S, _S, _S, _NS, _NS, _NS, tuple)
_DIFFERENCE = (_S, _S, _S, tuple)
_FINDING_FIELDS = tuple(f.name for f in fields(Finding))


def _shaped(raw: Any, shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """``raw`` if it is a tuple whose items have these types; ``ValueError`` otherwise."""
    if not (
        isinstance(raw, tuple)
        and len(raw) == len(shape)  # pyright: ignore[reportUnknownArgumentType]
        and all(isinstance(v, t) for v, t in zip(raw, shape, strict=True))  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    ):
        raise ValueError("stored finding of the wrong shape")
    return raw  # pyright: ignore[reportUnknownVariableType]


def _names(raw: tuple[Any, ...]) -> tuple[str, ...]:
    return _shaped(raw, (_S,) * len(raw))


def _decode(raw: Any) -> Finding:
    """A stored finding, every field type-checked (``ValueError`` if anything is off)."""
    r = _shaped(raw, _FINDING)
    ev = None
    if r[15] is not None:
        f = _shaped(r[15], _EVIDENCE)
        ev = Evidence(f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], _names(f[9]))
    differences = tuple(
        Difference(d[0], d[1], d[2], _names(d[3])) for d in (_shaped(x, _DIFFERENCE) for x in r[16])
    )
    named: dict[str, Any] = dict(zip(_FINDING_FIELDS, r, strict=True))
    named.update(
        severity=Severity(r[5]), params=_names(r[12]), evidence=ev, differences=differences
    )
    return Finding(**named)


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
        payload = (
            None if directory is None else read_framed(directory, _FILE, _HEADER, _is_run_table)
        )
        self.runs: dict[bytes, tuple[bytes, Any, Any]] = payload or {}

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
