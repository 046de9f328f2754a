"""Method signatures read from the AST: parameter names, kinds, defaults and decorators.

Nothing here imports or runs scanned code; a :class:`Signature` is built from an
``ast.FunctionDef``/``ast.AsyncFunctionDef`` node plus the file's import aliases, which are
used to recognise decorators such as ``ft.cached_property`` after ``import functools as ft``.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from enum import IntEnum
from typing import NamedTuple


class ParamKind(IntEnum):
    """Parameter kinds, in the order Python requires them in a ``def``."""

    POSITIONAL_ONLY = 0
    POSITIONAL_OR_KEYWORD = 1
    VAR_POSITIONAL = 2
    KEYWORD_ONLY = 3
    VAR_KEYWORD = 4


class Param(NamedTuple):
    """One parameter of a ``def``: its name, kind and whether it has a default."""

    name: str
    kind: ParamKind
    has_default: bool


# Canonical decorator names the checker understands, after resolving import aliases.
STATICMETHOD = "staticmethod"
CLASSMETHOD = "classmethod"
PROPERTY = "property"
ABSTRACT = "abstractmethod"
OVERLOAD = "overload"
OVERRIDE = "override"

_KNOWN_DECORATORS: dict[str, str] = {
    "builtins.staticmethod": STATICMETHOD,
    "builtins.classmethod": CLASSMETHOD,
    "builtins.property": PROPERTY,
    "functools.cached_property": PROPERTY,
    "abc.abstractmethod": ABSTRACT,
    "abc.abstractproperty": PROPERTY,
    "abc.abstractclassmethod": CLASSMETHOD,
    "abc.abstractstaticmethod": STATICMETHOD,
    "typing.overload": OVERLOAD,
    "typing_extensions.overload": OVERLOAD,
    "typing.override": OVERRIDE,
    "typing_extensions.override": OVERRIDE,
}
_ACCESSOR_SUFFIXES = (".setter", ".getter", ".deleter")

# Methods Python calls as class methods or static methods without a decorator.
_IMPLICIT_CLASSMETHODS = frozenset({"__init_subclass__", "__class_getitem__"})
_IMPLICIT_STATICMETHODS = frozenset({"__new__"})


class MethodKind(IntEnum):
    """How a method receives its implicit first argument."""

    INSTANCE = 0
    CLASS = 1
    STATIC = 2


class Signature(NamedTuple):
    """The part of a method's ``def`` that decides which calls it accepts (``params`` includes
    ``self``/``cls`` as written; :meth:`explicit_params` does not)."""

    name: str
    params: tuple[Param, ...]
    decorators: frozenset[str]
    is_async: bool
    line: int
    col: int
    async_generator: bool = False
    """``async def`` containing ``yield``: called without ``await``, like a plain ``def``
    returning an ``AsyncGenerator``."""
    returns: tuple[tuple[Param, ...], ...] = ()
    """Parameters of every callable a decorated method returns (see
    :mod:`harness.overrides.facts.returned`); ``()`` when its value is unknown or not callable."""

    @property
    def kind(self) -> MethodKind:
        """Instance, class or static method."""
        if STATICMETHOD in self.decorators or self.name in _IMPLICIT_STATICMETHODS:
            return MethodKind.STATIC
        if CLASSMETHOD in self.decorators or self.name in _IMPLICIT_CLASSMETHODS:
            return MethodKind.CLASS
        return MethodKind.INSTANCE

    @property
    def is_property(self) -> bool:
        """True for ``@property``, ``@functools.cached_property`` and property accessors."""
        return PROPERTY in self.decorators

    @property
    def is_overload(self) -> bool:
        """True for a ``@typing.overload`` stub (not the implementation)."""
        return OVERLOAD in self.decorators

    @property
    def has_override_decorator(self) -> bool:
        """True when decorated with ``typing.override`` or ``typing_extensions.override``."""
        return OVERRIDE in self.decorators

    def explicit_params(self) -> tuple[Param, ...]:
        """Parameters a caller supplies: without the bound ``self``/``cls``."""
        if self.kind is MethodKind.STATIC or not self.params:
            return self.params
        first = self.params[0]
        if first.kind in (ParamKind.POSITIONAL_ONLY, ParamKind.POSITIONAL_OR_KEYWORD):
            return self.params[1:]
        return self.params  # `def m(*args)`: self arrives inside *args.

    def render(self, qualname: str | None = None) -> str:
        """``[async ]def name(self, a, /, b=..., *args, c, **kw)`` (annotations omitted)."""
        parts: list[str] = []
        star_done = False
        for i, param in enumerate(self.params):
            if param.kind is ParamKind.VAR_POSITIONAL:
                parts.append(f"*{param.name}")
                star_done = True
            elif param.kind is ParamKind.VAR_KEYWORD:
                parts.append(f"**{param.name}")
            else:
                if param.kind is ParamKind.KEYWORD_ONLY and not star_done:
                    parts.append("*")
                    star_done = True
                parts.append(f"{param.name}=..." if param.has_default else param.name)
            nxt = self.params[i + 1].kind if i + 1 < len(self.params) else None
            if param.kind is ParamKind.POSITIONAL_ONLY and nxt is not ParamKind.POSITIONAL_ONLY:
                parts.append("/")
        prefix = "".join(f"@{d} " for d in sorted(self.decorators & _SHOWN_DECORATORS))
        head = "async def" if self.is_async else "def"
        return f"{prefix}{head} {qualname or self.name}({', '.join(parts)})"


_SHOWN_DECORATORS = frozenset({STATICMETHOD, CLASSMETHOD, PROPERTY})


def dotted_name(node: ast.expr) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, ``None`` for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def first_param(func: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The name of the first positional parameter (a method's ``self``/``cls``), if any."""
    positional = func.args.posonlyargs or func.args.args
    return positional[0].arg if positional else None


def canonical_decorator(node: ast.expr, aliases: Mapping[str, str]) -> str | None:
    """Map a decorator expression to one of the canonical names above, or ``None``; ``aliases`` maps
    local names to their imported dotted targets."""
    if isinstance(node, ast.Call):
        node = node.func
    name = dotted_name(node)
    if name is None:
        return None
    if name.endswith(_ACCESSOR_SUFFIXES):
        return PROPERTY  # @x.setter / @x.getter / @x.deleter
    head, _, rest = name.partition(".")
    if head in aliases:
        target = aliases[head]
        full = f"{target}.{rest}" if rest else target
    elif rest:
        full = name
    else:
        full = f"builtins.{name}"
    return _KNOWN_DECORATORS.get(full)


_POSITIONAL = (ParamKind.POSITIONAL_OR_KEYWORD, ParamKind.POSITIONAL_ONLY)  # by "before the /"


def parameters(args: ast.arguments) -> tuple[Param, ...]:
    """The parameters of a ``def`` or ``lambda``, as written."""
    only = len(args.posonlyargs)
    first_default = only + len(args.args) - len(args.defaults)
    params = [
        Param(arg.arg, _POSITIONAL[i < only], i >= first_default)
        for i, arg in enumerate([*args.posonlyargs, *args.args])
    ]
    if args.vararg is not None:
        params.append(Param(args.vararg.arg, ParamKind.VAR_POSITIONAL, False))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params.append(Param(arg.arg, ParamKind.KEYWORD_ONLY, default is not None))
    if args.kwarg is not None:
        params.append(Param(args.kwarg.arg, ParamKind.VAR_KEYWORD, False))
    return tuple(params)


def from_function(
    node: ast.FunctionDef | ast.AsyncFunctionDef, aliases: Mapping[str, str]
) -> Signature:
    """Build a :class:`Signature` from a function definition node."""
    decorators = frozenset(
        d for d in (canonical_decorator(dec, aliases) for dec in node.decorator_list) if d
    )
    return Signature(
        name=node.name,
        params=parameters(node.args),
        decorators=decorators,
        is_async=isinstance(node, ast.AsyncFunctionDef),
        line=node.lineno,
        col=node.col_offset,
    )
