"""The scanned tree as the resolver sees it: modules, class statements and what they bind. A class
refers to its module weakly, so the graph is freed by reference counting alone.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from harness.overrides.discover import SourceFile
from harness.overrides.facts.records import ClassFacts, Wrapper
from harness.overrides.facts.signature import Signature
from harness.overrides.summary import ClassSummary, FileSummary, Import


@dataclass(eq=False)
class ModuleInfo:
    """One module of the tree and the names it binds at top level."""

    file: SourceFile
    summary: FileSummary
    name: str
    classes: dict[str, ClassInfo] = field(default_factory=lambda: {})
    """Top-level classes by name."""
    members: list[ClassInfo] = field(default_factory=lambda: [])
    """Every class statement of the module, nested ones included, in source order."""
    imports: dict[str, Import] = field(default_factory=lambda: {})
    aliases: dict[str, str] = field(default_factory=lambda: {})
    functions: dict[str, Wrapper] = field(default_factory=lambda: {})
    """Module-level functions that return an inner function (decorators)."""
    bindings: dict[str, list[Binding]] = field(default_factory=lambda: {})
    """Every top-level binding of a name, in source order (for definition-time lookup)."""
    external: bool = False
    """Read from outside the scanned tree (standard library, installed packages)."""


class Binding(NamedTuple):
    """One top-level statement binding a name: a class, an import or an alias."""

    line: int
    cls: ClassInfo | None = None
    imp: Import | None = None
    alias: str | None = None


@dataclass(eq=False)
class FunctionInfo:
    """A module-level decorator function (see :class:`harness.overrides.facts.dispatch.Wrapper`)."""

    module: ModuleInfo
    wrapper: Wrapper


@dataclass(eq=False)
class ClassInfo:
    """A class statement with its resolved bases (filled in by :mod:`harness.overrides.model.names`)."""

    key: str
    """Qualified name: ``module.Outer.Inner``."""
    module_ref: weakref.ReferenceType[ModuleInfo] = field(repr=False)
    """Its module, weakly (see the module docstring): use :attr:`module`."""
    summary: ClassSummary
    bases: list[ClassInfo] = field(default_factory=lambda: [])
    nested: dict[str, ClassInfo] = field(default_factory=lambda: {})
    unresolved_bases: bool = False
    unresolved: list[str] = field(default_factory=lambda: [])
    """The bases as written that resolve to no class."""
    previous: ClassInfo | None = None
    """An earlier class of the same name in the same scope (``class A(A)`` refers to it)."""
    alternatives: list[tuple[ClassInfo, str, tuple[int, ...]]] = field(default_factory=lambda: [])
    """Bases whose name the module binds to different classes before the ``class`` statement (``if
    fast: from .fast import Base`` ``else: ...``): the one read, the name, the binding lines."""
    facts: ClassFacts | None = None
    """Dispatch facts (escapes, dynamic dispatch, descriptors, decorators), if any."""
    opaque: set[str] = field(default_factory=lambda: set())
    """Names whose ``def`` a decorator replaced by an object of another kind (still bound by
    the class, no longer compared as methods)."""
    _methods: dict[str, Signature] | None = None
    _bound: frozenset[str] | None = None

    @property
    def module(self) -> ModuleInfo:
        """The module whose statement this is (alive as long as its project is)."""
        module = self.module_ref()
        if module is None:
            raise RuntimeError(f"{self.key}: its project was freed, and its module with it")
        return module

    @property
    def qualname(self) -> str:
        """Name inside its module (``Outer.Inner``)."""
        return self.summary.qualname

    @property
    def methods(self) -> dict[str, Signature]:
        """Effective ``def`` per method name (decoded from the cache on first use)."""
        if self._methods is None:
            self._methods = {m.name: m for m in self.summary.methods}
        return self._methods

    def replace_methods(self, methods: dict[str, Signature]) -> None:
        """Set the effective ``def`` per name (after decorators were applied)."""
        self._methods = methods

    def defines(self, name: str) -> bool:
        """True if the class body binds ``name`` (by ``def`` or otherwise)."""
        if self._bound is None:
            self._bound = frozenset(self.summary.method_names) | self.summary.attributes
        return name in self._bound


Target = ClassInfo | ModuleInfo | FunctionInfo


class ExternalModules(Protocol):
    """Supplies modules from outside the scanned tree, by absolute name, on demand."""

    def module(self, name: str) -> tuple[SourceFile, FileSummary] | None:
        """The file and summary of module ``name``, or ``None`` if it has no readable source."""
        ...


class InheritanceCycle(NamedTuple):
    """A class that inherits from itself, directly or through other classes."""

    cls: ClassInfo
    cycle: tuple[ClassInfo, ...]
    """The classes on the cycle, from one back to itself."""


class NoLinearization(NamedTuple):
    """A class whose bases have no consistent C3 method resolution order."""

    cls: ClassInfo
    bases: tuple[ClassInfo, ...]


MroProblem = InheritanceCycle | NoLinearization
"""A class whose MRO could not be computed (its MRO is then the class alone)."""


class MisrootedBase(NamedTuple):
    """A base imported from a module name that no module of the tree has, while a file of
    the tree would have that name if another directory were an import root."""

    cls: ClassInfo
    base: str
    """The base as written."""
    module: str
    """The absolute module name it is imported from (``pkg.base``)."""
    file: SourceFile
    """The file of the tree that would be ``module``."""
    root: str
    """The directory that would make it so."""
