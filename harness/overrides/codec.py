"""Compact, fast serialisation of :class:`FileSummary` for the cache and worker processes.

Summaries are flattened to nested tuples of builtins and written with :mod:`marshal`
(several times faster to load than pickling named tuples and enums). A class's signatures
and calls, and a module's calls, are marshalled separately and kept as bytes when a summary
is loaded: they are decoded (with ``tuple.__new__`` and table lookups for enums) only when
the analysis first asks for them (:class:`harness.overrides.summary.Deferred`).
"""

from __future__ import annotations

import marshal
from typing import Any

from harness.overrides.callsites import CallSite, Receiver
from harness.overrides.dispatch import (
    Atom,
    ClassFacts,
    DispatchSummary,
    ForeignCall,
    Guard,
    Wrapper,
)
from harness.overrides.signature import Param, ParamKind, Signature
from harness.overrides.summary import ClassSummary, Deferred, FileSummary, Import, ParseFailure

EMPTY_DISPATCH = DispatchSummary((), (), (), (), ())

_KINDS = {int(k): k for k in ParamKind}
_RECEIVERS = {int(r): r for r in Receiver}
_new: Any = getattr(tuple, "__new__")  # `Cls._make` without its per-object checks  # noqa: B009


class CorruptSummary(Exception):
    """A deferred part of a cached summary could not be decoded."""


def _enc_sig(s: Signature) -> tuple[Any, ...]:
    return (
        s.name,
        tuple((p.name, int(p.kind), p.has_default) for p in s.params),
        tuple(sorted(s.decorators)),
        s.is_async,
        s.line,
        s.col,
        s.async_generator,
    )


def _enc_calls(calls: tuple[CallSite, ...]) -> bytes:
    return marshal.dumps(tuple((int(c.receiver), *c[1:]) for c in calls))


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
            marshal.dumps(tuple(_enc_sig(m) for m in c.methods)),
            _enc_calls(c.calls),
        )
        for c in summary.classes
    )
    return (
        classes,
        tuple(tuple(i) for i in summary.imports),
        summary.star_imports,
        summary.aliases,
        summary.ignores,
        _enc_calls(summary.calls),
        tuple(tuple(f) for f in summary.parse_failures),
        tuple(sorted(summary.called)),
        _enc_dispatch(summary.dispatch),
    )


def _enc_params(params: tuple[Param, ...]) -> tuple[Any, ...]:
    return tuple((p.name, int(p.kind), p.has_default) for p in params)


def _enc_dispatch(d: DispatchSummary) -> tuple[Any, ...]:
    return (
        tuple(
            (
                c.qualname,
                tuple(sorted(c.escapes)),
                c.dynamic,
                c.attr_types,
                c.descriptor,
                c.decorators,
            )
            for c in d.classes
        ),
        tuple(
            (w.name, w.line, _enc_params(w.params), w.factory, w.passthrough) for w in d.wrappers
        ),
        tuple(tuple(f) for f in d.foreign),
        tuple((g.line, g.col, tuple(tuple(a) for a in g.atoms)) for g in d.guards),
        d.prefixes,
    )


def _dec_dispatch(raw: Any) -> DispatchSummary:
    if not raw[0] and not raw[1] and not raw[2] and not raw[3] and not raw[4]:
        return EMPTY_DISPATCH
    classes, wrappers, foreign, guards, prefixes = raw
    out: DispatchSummary = _new(
        DispatchSummary,
        (
            tuple(
                [_new(ClassFacts, (c[0], frozenset(c[1]), c[2], c[3], c[4], c[5])) for c in classes]
            ),
            tuple(
                [
                    _new(
                        Wrapper,
                        (
                            w[0],
                            w[1],
                            tuple([_new(Param, (p[0], _KINDS[p[1]], p[2])) for p in w[2]]),
                            w[3],
                            w[4],
                        ),
                    )
                    for w in wrappers
                ]
            ),
            tuple([_new(ForeignCall, f) for f in foreign]),
            tuple(
                [_new(Guard, (g[0], g[1], tuple([_new(Atom, a) for a in g[2]]))) for g in guards]
            ),
            prefixes,
        ),
    )
    return out


def dumps(summary: FileSummary) -> bytes:
    """Serialise one summary."""
    return marshal.dumps(encode(summary))


def _signatures(blob: bytes) -> tuple[Signature, ...]:
    """Decode a class's signatures (:class:`CorruptSummary` if they are not well formed)."""
    decorators: dict[tuple[str, ...], frozenset[str]] = {}
    out: list[Signature] = []
    try:
        for name, params, decos, is_async, line, col, async_generator in marshal.loads(blob):
            frozen = decorators.get(decos)
            if frozen is None:
                frozen = decorators[decos] = frozenset(decos)
            kinds = tuple([_new(Param, (p[0], _KINDS[p[1]], p[2])) for p in params])
            sig = (name, kinds, frozen, is_async, line, col, async_generator)
            out.append(_new(Signature, sig))
    except Exception as exc:  # marshal and unpacking raise many types; all mean "corrupt"
        raise CorruptSummary(str(exc)) from exc
    return tuple(out)


def _calls(blob: bytes) -> tuple[CallSite, ...]:
    """Decode call sites (:class:`CorruptSummary` if they are not well formed)."""
    try:
        calls = tuple([_new(CallSite, (_RECEIVERS[r[0]], *r[1:])) for r in marshal.loads(blob)])
    except Exception as exc:  # marshal and unpacking raise many types; all mean "corrupt"
        raise CorruptSummary(str(exc)) from exc
    if any(len(c) != len(CallSite._fields) for c in calls):
        raise CorruptSummary("call site of the wrong shape")
    return calls


def decode(raw: Any) -> FileSummary:
    """Rebuild a summary from :func:`encode`'s output (signatures and calls deferred)."""
    classes, imports, stars, aliases, ignores, calls, failures, called, dispatch = raw
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
        tuple([_new(Import, i) for i in imports]),
        stars,
        aliases,
        ignores,
        Deferred(calls, _calls),
        tuple([_new(ParseFailure, f) for f in failures]),
        frozenset(called),
        _dec_dispatch(dispatch),
    )


def loads(data: bytes) -> FileSummary:
    """Deserialise one summary (raises ``ValueError``, ``EOFError``, ``TypeError`` or
    ``LookupError`` if its outer structure is corrupt; :class:`CorruptSummary` later, when a
    deferred part is)."""
    return decode(marshal.loads(data))
