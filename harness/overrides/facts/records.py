"""The dispatch facts of one file, as records (extracted by
:mod:`harness.overrides.facts.dispatch`).
"""

from __future__ import annotations

from typing import NamedTuple

from harness.overrides.facts.signature import Param

DESCRIPTOR_NONE = 0
DESCRIPTOR_VALUE = 1
"""``__get__`` returns what the wrapped function computes: the method reads as a value."""
DESCRIPTOR_METHOD = 2
"""``__get__`` binds the function (``fn.__get__(obj)``, ``MethodType``, ``partial``)."""

GUARD_ISINSTANCE = "isinstance"
GUARD_PARAM = "param"
GUARD_IDENTITY = "identity"
ANY_NAME = ""
"""A dynamic-dispatch prefix that matches every method name."""
MIN_PREFIX = 3
"""Letters a name prefix of ``getattr(obj, prefix + name)`` on another object needs to count:
``"visit_" + kind`` names a family of methods; ``"_" + name`` could be anything and is
taken as an attribute lookup, not a dispatch."""


class Atom(NamedTuple):
    """One test a guarded call depends on."""

    kind: str
    """:data:`GUARD_ISINSTANCE` (``names`` = the classes), :data:`GUARD_PARAM`
    (``names`` = ``(method, parameter)``) or :data:`GUARD_IDENTITY` (``type(self).m is C.m``:
    ``names`` = ``(m, C)``)."""
    names: tuple[str, ...]
    negated: bool
    """The call runs only when the test is false."""
    line: int
    """Where the test is written."""


class Guard(NamedTuple):
    """The tests that must hold for the call at ``(line, col)`` to run."""

    line: int
    col: int
    atoms: tuple[Atom, ...]


class ForeignCall(NamedTuple):
    """``obj.method(...)`` on a receiver the call-site collector does not type."""

    method: str
    receiver_class: str | None
    """Dotted class of ``self.attr`` when the class binds it once to ``C(...)``."""
    rejected: tuple[str, ...]
    """Classes the enclosing function raises for (``isinstance(x, C)`` then ``raise``)."""


class ClassFacts(NamedTuple):
    """Dispatch facts of one class statement."""

    qualname: str
    escapes: tuple[tuple[str, str], ...]
    """``(name, method)``: ``name`` used as ``self.name`` without a call, or as
    ``getattr(self, "name")``, in the class's method ``method`` (``""``: outside its
    methods); sorted."""
    dynamic: tuple[tuple[str, str], ...]
    """``(prefix, method)``: ``getattr(self, <computed name>)`` in the class's method ``method``
    (``""``: outside its methods) may call a method whose name starts with ``prefix``
    (:data:`ANY_NAME`: any)."""
    attr_types: tuple[tuple[str, str], ...]
    descriptor: int
    decorators: tuple[tuple[int, tuple[str, ...]], ...]
    """``(def line, decorators)`` of methods with decorators the checker does not know,
    outermost first; a call is written ``name()``."""


class Wrapper(NamedTuple):
    """A module-level function that returns an inner function (a decorator)."""

    name: str
    line: int
    params: tuple[Param, ...]
    """The inner function's parameters, as written."""
    factory: bool
    """``@name(...)``: calling it returns the decorator."""
    passthrough: bool
    """The inner function takes ``*args, **kwargs``: calls reach the wrapped function, less
    the keyword-only parameters among ``params`` (written, or popped from ``**kwargs``): the
    wrapper consumes those."""


class DispatchSummary(NamedTuple):
    """Everything above for one file."""

    classes: tuple[ClassFacts, ...]
    wrappers: tuple[Wrapper, ...]
    foreign: tuple[ForeignCall, ...]
    guards: tuple[Guard, ...]
    prefixes: tuple[str, ...]
    """Name prefixes of ``getattr(obj, "prefix" + ...)`` on any receiver."""
