"""Compact, fast serialisation of :class:`FileSummary` for the cache and worker processes.

Summaries are flattened to tuples of builtins (:mod:`harness.overrides.facts.tuple_codec`) and
marshalled; a class's signatures and calls, and the file's attribute names, separately, decoded when
first asked for (``Deferred``).
"""

from __future__ import annotations

import marshal
from collections.abc import Callable
from typing import Any, TypeVar

from harness.overrides.facts.callsites import CallSite
from harness.overrides.facts.dispatch import EMPTY
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

T = TypeVar("T")

_enc_signatures, _dec_signatures = compile_codec(tuple[Signature, ...])
_enc_call_sites, _dec_call_sites = compile_codec(tuple[CallSite, ...])
_enc_imports, _dec_imports = compile_codec(tuple[Import, ...])
_enc_failures, _dec_failures = compile_codec(tuple[ParseFailure, ...])
_enc_dispatch, _dec_dispatch = compile_codec(DispatchSummary)


class CorruptSummary(Exception):
    """A deferred part of a cached summary could not be decoded."""


def dumps(summary: FileSummary) -> bytes:
    """Serialise one summary: nested tuples of builtins, the deferrable parts as marshalled bytes."""
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
    return marshal.dumps(
        (
            classes,
            _enc_imports(summary.imports),
            summary.star_imports,
            summary.aliases,
            summary.ignores,
            marshal.dumps(_enc_call_sites(summary.calls)),
            _enc_failures(summary.parse_failures),
            tuple(sorted(summary.called)),
            _enc_dispatch(summary.dispatch),
            marshal.dumps(tuple(tuple(sorted(names)) for names in summary.names)),
        )
    )


def _lazy(decode: Callable[[Any], T]) -> Callable[[bytes], T]:
    """A decoder of one deferred part (:class:`CorruptSummary` if it is not well formed)."""

    def load(blob: bytes) -> T:
        try:
            return decode(marshal.loads(blob))
        except Exception as exc:  # marshal and unpacking raise many types; all mean "corrupt"
            raise CorruptSummary(str(exc)) from exc

    return load


_signatures: Callable[[bytes], tuple[Signature, ...]] = _lazy(_dec_signatures)
_calls: Callable[[bytes], tuple[CallSite, ...]] = _lazy(_dec_call_sites)
_names: Callable[[bytes], AttributeNames] = _lazy(
    lambda names: AttributeNames(*(frozenset(n) for n in names))
)


def loads(data: bytes) -> FileSummary:
    """Deserialise one summary, signatures, calls and attribute names deferred (``ValueError``,
    ``EOFError``, ``TypeError`` or ``LookupError`` now, :class:`CorruptSummary` on first use, if
    corrupt)."""
    classes, imports, stars, aliases, ignores, calls, failures, called, dispatch, names = (
        marshal.loads(data)
    )
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
        EMPTY if not any(dispatch) else _dec_dispatch(dispatch),
        Deferred(names, _names),
    )
