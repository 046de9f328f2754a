"""Encoders and decoders between NamedTuples and plain tuples, derived from ``_fields``.

:func:`compile_codec` writes one encoder and one decoder per type as straight-line Python (as
:mod:`dataclasses` writes ``__init__``): ``IntEnum`` fields become ints, ``frozenset`` fields sorted
tuples, nested NamedTuples are converted recursively. A row of the wrong length raises
``ValueError``.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable
from typing import Any

_PLAIN = frozenset({str, int, bool, float, bytes, type(None)})
_NEW: Any = getattr(tuple, "__new__")  # noqa: B009 (untyped)
Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]
"""``(encode, decode)`` for one type."""


class _Writer:
    """Accumulates the names the generated code refers to (types, enum tables)."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"_new": _NEW}
        self._fresh = 0

    def fresh(self) -> str:
        self._fresh += 1
        return f"v{self._fresh}"

    def ref(self, prefix: str, obj: Any, value: Any = None) -> str:
        name = f"_{prefix}_{obj.__name__}"
        self.namespace.setdefault(name, obj if value is None else value)
        return name

    def convert(self, hint: Any, var: str, encoding: bool) -> str | None:
        """An expression encoding ``var`` of type ``hint`` (decoding it into ``hint``, unless
        ``encoding``); ``None`` when it passes unchanged."""
        shape = _shape(hint)
        if shape == "enum":
            return (
                f"int({var})"
                if encoding
                else f"{self.ref('E', hint, {int(m): m for m in hint})}[{var}]"
            )
        if shape == "frozenset":
            return f"tuple(sorted({var}))" if encoding else f"frozenset({var})"
        if shape == "tuple":
            item = typing.get_args(hint)[0]
            if _shape(item) == "namedtuple":  # rows unpacked: no attribute lookups
                names = [self.fresh() for _ in item._fields]
                row = self.row(item, names, encoding)
                if row is not None:
                    return f"tuple([{row} for ({', '.join(names)},) in {var}])"
            name = self.fresh()
            inner = self.convert(item, name, encoding)
            return None if inner is None else f"tuple([{inner} for {name} in {var}])"
        if shape == "plain":
            return None
        if encoding:
            return self.row(hint, [f"{var}.{f}" for f in hint._fields], True) or f"tuple({var})"
        names = [f"{var}[{i}]" for i in range(len(hint._fields))]
        return self.row(hint, names, False) or f"_new({self.ref('T', hint)}, {var})"

    def row(self, hint: Any, names: list[str], encoding: bool) -> str | None:
        """``hint``'s fields held in ``names``, converted, as a tuple (decoding: rebuilt into
        ``hint``), or ``None`` if they all pass unchanged (the encoded row is then the decoded
        one's content)."""
        fields = typing.get_type_hints(hint)
        parts = [
            self.convert(fields[f], n, encoding) for f, n in zip(hint._fields, names, strict=True)
        ]
        if all(p is None for p in parts):
            return None
        values = f"({', '.join(p or n for p, n in zip(parts, names, strict=True))},)"
        return values if encoding else f"_new({self.ref('T', hint)}, {values})"


def _shape(hint: Any) -> str:
    """How a field type is encoded: plain, enum, frozenset, tuple (of one type), namedtuple."""
    origin = typing.get_origin(hint)
    if hint in _PLAIN:
        return "plain"
    if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
        return "enum"
    if isinstance(hint, type) and "_fields" in vars(hint):
        return "namedtuple"
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union) and all(_shape(a) == "plain" for a in args):
        return "plain"
    if origin is frozenset and all(_shape(a) == "plain" for a in args):
        return "frozenset"
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return "plain" if _shape(args[0]) == "plain" else "tuple"
    if origin is tuple and all(_shape(a) == "plain" for a in args):
        return "plain"
    raise TypeError(f"positional codec: no encoding for field type {hint!r}")


def compile_codec(hint: Any) -> Codec:
    """The encoder and decoder of ``hint``: a NamedTuple or ``tuple[NamedTuple, ...]``."""
    writer = _Writer()
    encoded = writer.convert(hint, "value", True) or "value"
    unpack = ""
    if _shape(hint) == "namedtuple":  # unpacked, so that a row of the wrong length raises
        names = [writer.fresh() for _ in hint._fields]
        unpack = f"    ({', '.join(names)},) = value\n"
        decoded = writer.row(hint, names, False) or f"_new({writer.ref('T', hint)}, value)"
    else:
        decoded = writer.convert(hint, "value", False) or "value"
    source = f"def encode(value):\n    return {encoded}\n"
    source += f"def decode(value):\n{unpack}    return {decoded}\n"
    exec(compile(source, f"<positional codec of {hint!r}>", "exec"), writer.namespace)
    return writer.namespace["encode"], writer.namespace["decode"]
