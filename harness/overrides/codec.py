"""Compact, fast serialisation of :class:`FileSummary` for the cache and worker processes.

Summaries are flattened to tuples of builtins (:mod:`harness.overrides.facts.tuple_codec`) and
written with :mod:`marshal`. A class's signatures and calls are marshalled separately and decoded
only when first asked for (:class:`harness.overrides.summary.Deferred`).
"""

from __future__ import annotations

import marshal
from typing import Any

from harness.overrides.facts.callsites import CallSite
from harness.overrides.facts.records import DispatchSummary
from harness.overrides.facts.signature import Signature
from harness.overrides.facts.tuple_codec import compile_codec
from harness.overrides.summary import (
    AttributeNames,
    ClassSummary,
    Deferred,
    FileSummary,
    Import,
    ParseFailure,
)

EMPTY_DISPATCH = DispatchSummary((), (), (), (), ())

_enc_signatures, _dec_signatures = compile_codec(tuple[Signature, ...])
_enc_call_sites, _dec_call_sites = compile_codec(tuple[CallSite, ...])
_enc_imports, _dec_imports = compile_codec(tuple[Import, ...])
_enc_failures, _dec_failures = compile_codec(tuple[ParseFailure, ...])
_enc_dispatch, _dec_dispatch = compile_codec(DispatchSummary)


class CorruptSummary(Exception):
    """A deferred part of a cached summary could not be decoded."""


def encode(summary: FileSummary) -> tuple[Any, ...]:
    """Nested tuples of builtins, with the deferrable parts as marshalled bytes."""
    classes = tuple(
        (
            c.qualname,
            c.line,
            c.col,
            c.bases,
            c.method_names,
            tuple(sorted(c.attributes)),
            tuple(sorted(c.instance_attributes)),
            marshal.dumps(_enc_signatures(c.methods)),
            marshal.dumps(_enc_call_sites(c.calls)),
        )
        for c in summary.classes
    )
    return (
        classes,
        _enc_imports(summary.imports),
        summary.star_imports,
        summary.aliases,
        summary.ignores,
        marshal.dumps(_enc_call_sites(summary.calls)),
        _enc_failures(summary.parse_failures),
        tuple(sorted(summary.called)),
        _enc_dispatch(summary.dispatch),
        tuple(tuple(sorted(names)) for names in summary.names),
    )


def dumps(summary: FileSummary) -> bytes:
    """Serialise one summary."""
    return marshal.dumps(encode(summary))


def _signatures(blob: bytes) -> tuple[Signature, ...]:
    """Decode a class's signatures (:class:`CorruptSummary` if they are not well formed)."""
    try:
        out: tuple[Signature, ...] = _dec_signatures(marshal.loads(blob))
    except Exception as exc:  # marshal and unpacking raise many types; all mean "corrupt"
        raise CorruptSummary(str(exc)) from exc
    return out


def _calls(blob: bytes) -> tuple[CallSite, ...]:
    """Decode call sites (:class:`CorruptSummary` if they are not well formed)."""
    try:
        out: tuple[CallSite, ...] = _dec_call_sites(marshal.loads(blob))
    except Exception as exc:  # marshal and unpacking raise many types; all mean "corrupt"
        raise CorruptSummary(str(exc)) from exc
    return out


def decode(raw: Any) -> FileSummary:
    """Rebuild a summary from :func:`encode`'s output (signatures and calls deferred)."""
    classes, imports, stars, aliases, ignores, calls, failures, called, dispatch, names = raw
    return FileSummary(
        tuple(
            [
                ClassSummary(
                    c[0],
                    c[1],
                    c[2],
                    c[3],
                    Deferred(c[7], _signatures),
                    frozenset(c[5]),
                    frozenset(c[6]),
                    Deferred(c[8], _calls),
                    method_names=c[4],
                )
                for c in classes
            ]
        ),
        _dec_imports(imports),
        stars,
        aliases,
        ignores,
        Deferred(calls, _calls),
        _dec_failures(failures),
        frozenset(called),
        EMPTY_DISPATCH if not any(dispatch) else _dec_dispatch(dispatch),
        AttributeNames(*(frozenset(n) for n in names)),
    )


def loads(data: bytes) -> FileSummary:
    """Deserialise one summary (raises ``ValueError``, ``EOFError``, ``TypeError`` or
    ``LookupError`` if its outer structure is corrupt; :class:`CorruptSummary` later, when a
    deferred part is)."""
    return decode(marshal.loads(data))
