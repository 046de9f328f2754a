"""CPython's argument binding for a call shape against a signature: :func:`bind` returns the
``TypeError`` message CPython 3.10+ raises, or ``None`` if the call binds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from harness.overrides.compare import KEYWORD, POSITIONAL
from harness.overrides.facts.signature import MethodKind, Param, ParamKind, Signature


class CallShape(NamedTuple):
    """How a call passes its arguments (receiver excluded)."""

    n_positional: int
    keywords: tuple[str, ...]
    star: bool = False
    starstar: bool = False


def _quote_list(names: Sequence[str]) -> str:
    """CPython's ``format_missing``: 'a' / 'a' and 'b' / 'a', 'b', and 'c'."""
    quoted = [f"'{n}'" for n in names]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + f", and {quoted[-1]}"


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def bind(
    shape: CallShape, params: Sequence[Param], qualname: str, *, implicit: int = 0
) -> str | None:
    """The ``TypeError`` message for calling ``qualname`` with ``shape``, or ``None``; ``params`` as
    written (``self`` included), ``implicit`` the arguments Python prepends."""
    positional = [p for p in params if p.kind in POSITIONAL]
    kwonly = [p for p in params if p.kind is ParamKind.KEYWORD_ONLY]
    varargs = any(p.kind is ParamKind.VAR_POSITIONAL for p in params)
    varkw = any(p.kind is ParamKind.VAR_KEYWORD for p in params)
    given = shape.n_positional + implicit
    filled = {p.name for p in positional[:given]}

    keyword_names = {p.name for p in params if p.kind in KEYWORD}
    posonly = [p.name for p in params if p.kind is ParamKind.POSITIONAL_ONLY]
    for keyword in shape.keywords:
        if keyword not in keyword_names:
            if varkw:
                continue
            passed = [k for k in shape.keywords if k in posonly]
            if passed:
                return (
                    f"{qualname}() got some positional-only arguments passed as keyword "
                    f"arguments: '{', '.join(passed)}'"
                )
            return f"{qualname}() got an unexpected keyword argument '{keyword}'"
        if keyword in filled:
            return f"{qualname}() got multiple values for argument '{keyword}'"
        filled.add(keyword)

    if given > len(positional) and not varargs:
        kw_given = sum(1 for p in kwonly if p.name in filled)
        defaults = sum(1 for p in positional if p.has_default)
        sig = f"from {len(positional) - defaults} to " if defaults else ""
        sig += str(len(positional))
        plural = bool(defaults) or len(positional) != 1
        kw_part = (
            f" positional argument{_plural(given)} (and {kw_given} keyword-only argument{_plural(kw_given)})"
            if kw_given
            else ""
        )
        verb = "was" if given == 1 and not kw_given else "were"
        return (
            f"{qualname}() takes {sig} positional argument{'s' if plural else ''} "
            f"but {given}{kw_part} {verb} given"
        )
    if shape.star or shape.starstar:
        return None  # unpacked arguments may supply anything still missing
    missing = [p.name for p in positional if not p.has_default and p.name not in filled]
    if missing:
        return (
            f"{qualname}() missing {len(missing)} required positional argument"
            f"{_plural(len(missing))}: {_quote_list(missing)}"
        )
    missing = [p.name for p in kwonly if not p.has_default and p.name not in filled]
    if missing:
        return (
            f"{qualname}() missing {len(missing)} required keyword-only argument"
            f"{_plural(len(missing))}: {_quote_list(missing)}"
        )
    return None


def bind_method(
    shape: CallShape, sig: Signature, qualname: str, *, through_instance: bool
) -> str | None:
    """Bind a call made as ``obj.method(...)`` (``through_instance``) or ``Class.method(...)``."""
    bound = sig.kind is MethodKind.CLASS or (sig.kind is MethodKind.INSTANCE and through_instance)
    return bind(shape, sig.params, qualname, implicit=int(bound))
