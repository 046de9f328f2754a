"""Compact, fast serialisation of :class:`FileSummary` for the cache and worker processes.

Summaries are flattened to nested tuples of builtins and written with :mod:`marshal`
(several times faster to load than pickling named tuples and enums). Loading rebuilds the
named tuples with ``tuple.__new__`` and table lookups for enums.
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
from harness.overrides.summary import ClassSummary, FileSummary, Import, ParseFailure

_KINDS = {int(k): k for k in ParamKind}
_RECEIVERS = {int(r): r for r in Receiver}
_new: Any = getattr(tuple, "__new__")  # `Cls._make` without its per-object checks  # noqa: B009


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


def _enc_call(c: CallSite) -> tuple[Any, ...]:
    return (int(c.receiver), *c[1:])


def encode(summary: FileSummary) -> tuple[Any, ...]:
    """Nested tuples of builtins."""
    classes = tuple(
        (
            c.qualname,
            c.line,
            c.col,
            c.bases,
            tuple(_enc_sig(m) for m in c.methods),
            tuple(sorted(c.attributes)),
            tuple(sorted(c.instance_attributes)),
            tuple(_enc_call(x) for x in c.calls),
        )
        for c in summary.classes
    )
    return (
        classes,
        tuple(tuple(i) for i in summary.imports),
        summary.star_imports,
        summary.aliases,
        summary.ignores,
        tuple(_enc_call(x) for x in summary.calls),
        tuple(tuple(f) for f in summary.parse_failures),
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


def _dec_sig(raw: Any, decorators: dict[tuple[str, ...], frozenset[str]]) -> Signature:
    name, params, decos, is_async, line, col, async_generator = raw
    frozen = decorators.get(decos)
    if frozen is None:
        frozen = decorators[decos] = frozenset(decos)
    sig: Signature = _new(
        Signature,
        (
            name,
            tuple([_new(Param, (p[0], _KINDS[p[1]], p[2])) for p in params]),
            frozen,
            is_async,
            line,
            col,
            async_generator,
        ),
    )
    return sig


def _dec_call(raw: Any) -> CallSite:
    call: CallSite = _new(CallSite, (_RECEIVERS[raw[0]], *raw[1:]))
    return call


def decode(raw: Any) -> FileSummary:
    """Rebuild a summary from :func:`encode`'s output."""
    decorators: dict[tuple[str, ...], frozenset[str]] = {}
    classes, imports, stars, aliases, ignores, calls, failures, dispatch = raw
    summary: FileSummary = _new(
        FileSummary,
        (
            tuple(
                [
                    _new(
                        ClassSummary,
                        (
                            c[0],
                            c[1],
                            c[2],
                            c[3],
                            tuple([_dec_sig(m, decorators) for m in c[4]]),
                            frozenset(c[5]),
                            frozenset(c[6]),
                            tuple([_dec_call(x) for x in c[7]]),
                        ),
                    )
                    for c in classes
                ]
            ),
            tuple([_new(Import, i) for i in imports]),
            stars,
            aliases,
            ignores,
            tuple([_dec_call(x) for x in calls]),
            tuple([_new(ParseFailure, f) for f in failures]),
            _dec_dispatch(dispatch),
        ),
    )
    return summary


def loads(data: bytes) -> FileSummary:
    """Deserialise one summary (raises ``ValueError``, ``EOFError``, ``TypeError`` or
    ``LookupError`` if corrupt)."""
    return decode(marshal.loads(data))
