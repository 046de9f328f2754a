"""Resolve names to classes across the tree and compute C3 method resolution orders.

Resolution follows what the source says: classes defined in a module, module-level aliases
(``X = Y``), imports (absolute, relative, ``as`` aliases, re-exports through ``__init__``),
submodules and star imports. A base class is resolved as Python does when the ``class``
statement runs: the binding of its name in force at that line (an import above it, not a
class of the same name defined further down), and for a nested class the enclosing class
body first. Anything else (computed bases, classes of modules outside the tree that no
:class:`ExternalModules` provides) is unresolvable and silently skipped.

Methods are taken as their decorators leave them: a decorator that resolves to a descriptor
class reading as a value (``__get__`` calls the function, like ``functools.cached_property``)
makes a property; one that resolves to a function returning an inner function of its own
signature (``def deco(fn): def wrap(dialect, conn, **kw): ...; return wrap``) makes that
signature the method's. All walks are iterative or depth-bounded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from harness.overrides.discover import SourceFile
from harness.overrides.dispatch import (
    DESCRIPTOR_METHOD,
    DESCRIPTOR_NONE,
    DESCRIPTOR_VALUE,
    ClassFacts,
    Wrapper,
)
from harness.overrides.signature import PROPERTY, Signature
from harness.overrides.summary import ClassSummary, FileSummary, Import

_MAX_DEPTH = 40


@dataclass(eq=False)
class ModuleInfo:
    """One module of the tree and the names it binds at top level."""

    file: SourceFile
    summary: FileSummary
    name: str
    classes: dict[str, ClassInfo] = field(default_factory=lambda: {})
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
    """A module-level decorator function (see :class:`harness.overrides.dispatch.Wrapper`)."""

    module: ModuleInfo
    wrapper: Wrapper


@dataclass(eq=False)
class ClassInfo:
    """A class statement with its resolved bases (filled in by :class:`Project`)."""

    key: str
    """Qualified name: ``module.Outer.Inner``."""
    module: ModuleInfo
    summary: ClassSummary
    bases: list[ClassInfo] = field(default_factory=lambda: [])
    nested: dict[str, ClassInfo] = field(default_factory=lambda: {})
    unresolved_bases: bool = False
    previous: ClassInfo | None = None
    """An earlier class of the same name in the same scope (``class A(A)`` refers to it)."""
    facts: ClassFacts | None = None
    """Dispatch facts (escapes, dynamic dispatch, descriptors, decorators), if any."""
    opaque: set[str] = field(default_factory=lambda: set())
    """Names whose ``def`` a decorator replaced by an object of another kind."""
    _methods: dict[str, Signature] | None = None

    @property
    def qualname(self) -> str:
        """Name inside its module (``Outer.Inner``)."""
        return self.summary.qualname

    @property
    def methods(self) -> dict[str, Signature]:
        """Effective ``def`` per method name."""
        if self._methods is None:
            self._methods = {m.name: m for m in self.summary.methods}
        return self._methods

    def defines(self, name: str) -> bool:
        """True if the class body binds ``name`` (by ``def`` or otherwise)."""
        return name in self.methods or name in self.summary.attributes or name in self.opaque


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


class Project:
    """The whole scanned tree: modules, classes, bases, MROs and subclasses."""

    def __init__(
        self,
        modules: Iterable[tuple[SourceFile, FileSummary]],
        external: ExternalModules | None = None,
    ) -> None:
        self.modules: dict[str, ModuleInfo] = {}
        self.classes: list[ClassInfo] = []
        """Classes of the scanned tree (external ones are in :attr:`external_classes`)."""
        self.external_classes: list[ClassInfo] = []
        self._external = external
        self._missing: set[str] = set()
        infos: list[ModuleInfo] = []
        for file, summary in modules:
            info = ModuleInfo(file, summary, file.module)
            infos.append(info)
            self.modules.setdefault(file.module, info)
        for info in infos:
            for alias in info.file.aliases:
                self.modules.setdefault(alias, info)
            self._index_module(info)
        self._memo: dict[tuple[int, str], Target | None] = {}
        pending = list(self.classes)
        while pending:  # resolving a base may load external modules, and so more classes
            loaded = len(self.external_classes)
            for cls in pending:
                self._resolve_bases(cls)
            pending = self.external_classes[loaded:]
        self._mro: dict[int, list[ClassInfo]] = {}
        self.problems: list[MroProblem] = []
        self._compute_mros()
        for cls in self.all_classes():
            self._apply_decorators(cls)
        self.children: dict[int, list[ClassInfo]] = {}
        for cls in self.all_classes():
            for base in cls.bases:
                self.children.setdefault(id(base), []).append(cls)

    def all_classes(self) -> list[ClassInfo]:
        """Classes of the tree, then those of external modules loaded to resolve bases."""
        return [*self.classes, *self.external_classes]

    # -- indexing --------------------------------------------------------------------------

    def _index_module(self, info: ModuleInfo) -> None:
        summary = info.summary
        bindings: list[tuple[str, Binding]] = []
        for imp in summary.imports:
            info.imports[imp.name] = imp
            bindings.append((imp.name, Binding(imp.line, imp=imp)))
        for name, target, line in summary.aliases:
            info.aliases[name] = target
            bindings.append((name, Binding(line, alias=target)))
        info.functions = {w.name: w for w in summary.dispatch.wrappers}
        facts = {f.qualname: f for f in summary.dispatch.classes}
        by_qualname: dict[str, ClassInfo] = {}
        for cls_summary in summary.classes:
            cls = ClassInfo(f"{info.name}.{cls_summary.qualname}", info, cls_summary)
            cls.facts = facts.get(cls_summary.qualname)
            if cls_summary.qualname in by_qualname:
                cls.key = f"{cls.key}@{cls_summary.line}"
            (self.external_classes if info.external else self.classes).append(cls)
            previous = by_qualname.get(cls_summary.qualname)
            by_qualname[cls_summary.qualname] = cls
            outer, _, name = cls_summary.qualname.rpartition(".")
            if not outer:
                info.classes[name] = cls
                info.aliases.pop(name, None)
                bindings.append((name, Binding(cls_summary.line, cls=cls)))
            elif outer in by_qualname:
                by_qualname[outer].nested[name] = cls
            cls.previous = previous
        bindings.sort(key=lambda item: item[1].line)
        for name, binding in bindings:
            info.bindings.setdefault(name, []).append(binding)

    # -- name resolution -------------------------------------------------------------------

    def absolute_module(self, module: ModuleInfo, name: str, level: int) -> str:
        """Absolute module name of ``from {'.' * level}{name} import ...`` in ``module``."""
        if level == 0:
            return name
        parts = module.name.split(".")
        if not module.file.is_package:
            parts = parts[:-1]
        if level > 1:
            parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
        return ".".join([*parts, name] if name else parts)

    def resolve(self, module: ModuleInfo, dotted: str) -> Target | None:
        """What ``dotted`` names at the top level of ``module``, if it is in the tree."""
        key = (id(module), dotted)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = None  # breaks import cycles
        result = self._resolve_dotted(module, dotted, 0)
        self._memo[key] = result
        return result

    def resolve_class(self, module: ModuleInfo, dotted: str) -> ClassInfo | None:
        """Like :meth:`resolve`, but only classes."""
        target = self.resolve(module, dotted)
        return target if isinstance(target, ClassInfo) else None

    def _resolve_dotted(self, module: ModuleInfo, dotted: str, depth: int) -> Target | None:
        head, *rest = dotted.split(".")
        target = self._lookup(module, head, depth)
        return self._walk(target, rest, depth)

    def _walk(self, target: Target | None, parts: Iterable[str], depth: int) -> Target | None:
        """Follow attribute names from ``target``: nested classes, module members."""
        for part in parts:
            if isinstance(target, ClassInfo):
                target = target.nested.get(part)
            elif isinstance(target, ModuleInfo):
                target = self._lookup(target, part, depth + 1)
            else:
                return None
        return target

    def _lookup(self, module: ModuleInfo, name: str, depth: int) -> Target | None:
        if depth > _MAX_DEPTH:
            return None
        cls = module.classes.get(name)
        if cls is not None:
            return cls
        function = module.functions.get(name)
        if function is not None:
            return FunctionInfo(module, function)
        alias = module.aliases.get(name)
        if alias is not None and alias != name:
            return self._resolve_dotted(module, alias, depth + 1)
        imp = module.imports.get(name)
        if imp is not None:
            return self._resolve_import(module, imp, depth + 1)
        sub = self.modules.get(f"{module.name}.{name}")
        if sub is not None:
            return sub
        for star_module, level in module.summary.star_imports:
            target = self.modules.get(self.absolute_module(module, star_module, level))
            if target is not None and target is not module:
                found = self._lookup(target, name, depth + 1)
                if found is not None:
                    return found
        return None

    def _resolve_import(self, module: ModuleInfo, imp: Import, depth: int) -> Target | None:
        absolute = self.absolute_module(module, imp.module, imp.level)
        if imp.attr is None:
            return self._module(absolute)
        source = self._module(absolute)
        if source is None:
            return None
        if source is module and imp.attr == imp.name:
            return self._module(f"{absolute}.{imp.attr}")
        found = self._lookup(source, imp.attr, depth + 1)
        if found is None:
            return self._module(f"{absolute}.{imp.attr}")
        return found

    def _module(self, name: str) -> ModuleInfo | None:
        """A module of the tree, else one the external provider can read (loaded once)."""
        found = self.modules.get(name)
        if found is not None or self._external is None or name in self._missing or not name:
            return found
        loaded = self._external.module(name)
        if loaded is None:
            self._missing.add(name)
            return None
        file, summary = loaded
        info = ModuleInfo(file, summary, name, external=True)
        self.modules[name] = info
        self._index_module(info)
        return info

    def _resolve_shadowed(self, module: ModuleInfo, dotted: str) -> Target | None:
        """Resolve ``dotted`` ignoring the module's own class definitions of its head."""
        head, _, rest = dotted.partition(".")
        imp = module.imports.get(head)
        if imp is None:
            return None
        return self._walk(self._resolve_import(module, imp, 1), rest.split(".") if rest else (), 1)

    def _resolve_bases(self, cls: ClassInfo) -> None:
        for base in cls.summary.bases:
            target = None if base is None else self._at_definition(cls, base)
            if target is None and base is not None:
                target = self.resolve(cls.module, base)
            if target is cls and base is not None:
                # `class A(A)` refers to whatever `A` was bound to before: an earlier class
                # of that name, or an import (`from .llama import A` then `class A(A)`).
                target = cls.previous or self._resolve_shadowed(cls.module, base) or cls
            if isinstance(target, ClassInfo):
                cls.bases.append(target)
            elif base not in (None, "object"):
                cls.unresolved_bases = True

    def _at_definition(self, cls: ClassInfo, dotted: str) -> Target | None:
        """What ``dotted`` named when ``cls``'s statement ran: for a nested class, a class
        bound earlier in the enclosing class body; else the latest top-level binding above
        the outermost enclosing statement that resolves. ``None`` when no such binding
        exists (star imports, names bound later by a function): use :meth:`resolve`."""
        head, *rest = dotted.split(".")
        qualname = cls.summary.qualname
        outer = qualname.rpartition(".")[0]
        if outer:
            enclosing = self._class_at(cls.module, outer)
            inner = None if enclosing is None else enclosing.nested.get(head)
            if inner is not None and inner.summary.line < cls.summary.line:
                return self._walk(inner, rest, 0)
        top = self._class_at(cls.module, qualname.partition(".")[0])
        line = cls.summary.line if top is None else top.summary.line
        for binding in reversed(cls.module.bindings.get(head, ())):
            if binding.line >= line:
                continue
            target = self._binding_target(cls.module, binding, 0)
            if target is not None and target is not cls:
                return self._walk(target, rest, 0)
        return None

    def _binding_target(self, module: ModuleInfo, binding: Binding, depth: int) -> Target | None:
        if binding.cls is not None:
            return binding.cls
        if binding.imp is not None:
            return self._resolve_import(module, binding.imp, depth + 1)
        if binding.alias is None or depth > _MAX_DEPTH:
            return None
        head, *rest = binding.alias.split(".")
        for earlier in reversed(module.bindings.get(head, ())):
            if earlier.line < binding.line:
                found = self._binding_target(module, earlier, depth + 1)
                if found is not None:
                    return self._walk(found, rest, depth)
        return self._resolve_dotted(module, binding.alias, depth + 1)

    def _class_at(self, module: ModuleInfo, qualname: str) -> ClassInfo | None:
        head, *rest = qualname.split(".")
        found: ClassInfo | None = module.classes.get(head)
        for part in rest:
            found = None if found is None else found.nested.get(part)
        return found

    # -- decorators ------------------------------------------------------------------------

    def descriptor_kind(self, cls: ClassInfo) -> int:
        """How instances of ``cls`` behave as class attributes (``DESCRIPTOR_*``)."""
        for member in self.mro(cls):
            if member.facts is not None and member.facts.descriptor != DESCRIPTOR_NONE:
                return member.facts.descriptor
            if "property" in member.summary.bases or "builtins.property" in member.summary.bases:
                return DESCRIPTOR_VALUE  # class cached(property)
        return DESCRIPTOR_NONE

    def _apply_decorators(self, cls: ClassInfo) -> None:
        """Rewrite methods whose decorators the project defines (see the module docstring)."""
        if cls.facts is None or not cls.facts.decorators:
            return
        by_line = dict(cls.facts.decorators)
        methods: dict[str, Signature] = {}
        for name, sig in cls.methods.items():
            decorators = by_line.get(sig.line)
            effective = self._decorated(cls, sig, decorators) if decorators else sig
            if effective is None:
                cls.opaque.add(name)
            else:
                methods[name] = effective
        cls._methods = methods

    def _decorated(
        self, cls: ClassInfo, sig: Signature, decorators: tuple[str, ...]
    ) -> Signature | None:
        """The signature the decorators leave, or ``None`` when the name no longer binds a
        function (a non-descriptor object replaces it: its calls are not the ``def``'s)."""
        for written in reversed(decorators):  # the innermost decorator applies first
            called = written.endswith("()")
            target = self.resolve(cls.module, written.removesuffix("()"))
            if isinstance(target, ClassInfo) and not called:
                kind = self.descriptor_kind(target)
                if kind == DESCRIPTOR_VALUE:
                    sig = sig._replace(decorators=sig.decorators | {PROPERTY})
                elif kind != DESCRIPTOR_METHOD:
                    return None  # an instance of the class replaces the function
            elif (
                isinstance(target, FunctionInfo)
                and target.wrapper.factory == called
                and not target.wrapper.passthrough
            ):
                sig = sig._replace(params=target.wrapper.params)
        return sig

    # -- MRO -------------------------------------------------------------------------------

    def mro(self, cls: ClassInfo) -> list[ClassInfo]:
        """C3 linearisation over resolvable bases; ``[cls]`` alone if it is broken."""
        return self._mro.get(id(cls), [cls])

    def _compute_mros(self) -> None:
        """Post-order over the base graph (iterative), detecting cycles on the way."""
        state: dict[int, int] = {}  # 1 = on stack, 2 = done
        for start in self.all_classes():
            if id(start) in state:
                continue
            stack: list[tuple[ClassInfo, Iterator[ClassInfo]]] = [(start, iter(start.bases))]
            state[id(start)] = 1
            while stack:
                cls, bases = stack[-1]
                nxt = next(bases, None)
                if nxt is None:
                    stack.pop()
                    state[id(cls)] = 2
                    self._linearize(cls)
                    continue
                mark = state.get(id(nxt))
                if mark == 1:
                    cycle = [c for c, _ in stack]
                    cycle = [*cycle[cycle.index(nxt) :], nxt]
                    for member in set(cycle):
                        self._broken(InheritanceCycle(member, tuple(cycle)))
                    continue
                if mark is None:
                    state[id(nxt)] = 1
                    stack.append((nxt, iter(nxt.bases)))

    def _broken(self, problem: MroProblem) -> None:
        if all(p.cls is not problem.cls for p in self.problems):
            self.problems.append(problem)

    def _linearize(self, cls: ClassInfo) -> None:
        broken = {id(p.cls) for p in self.problems}
        if id(cls) in broken:
            self._mro[id(cls)] = [cls]
            return
        bases = [b for b in cls.bases if id(b) not in broken]
        sequences = [list(self.mro(b)) for b in bases] + [list(bases)]
        result = [cls]
        while True:
            sequences = [s for s in sequences if s]
            if not sequences:
                break
            for seq in sequences:
                head = seq[0]
                if not any(head in s[1:] for s in sequences):
                    break
            else:
                self._broken(NoLinearization(cls, tuple(bases)))
                self._mro[id(cls)] = [cls]
                return
            result.append(head)
            for s in sequences:
                if s[0] is head:
                    del s[0]
        self._mro[id(cls)] = result

    def release(self) -> None:
        """Break the class <-> module reference cycles so memory is freed at once by reference
        counting, without a cyclic garbage collection pass over the whole tree."""
        for cls in self.all_classes():
            cls.bases.clear()
            cls.nested.clear()
            cls.previous = None
        for module in self.modules.values():
            module.classes.clear()
        self.children.clear()
        self._memo.clear()
        self._mro.clear()

    # -- queries ---------------------------------------------------------------------------

    def definer(
        self, cls: ClassInfo, name: str, after: ClassInfo | None = None
    ) -> ClassInfo | None:
        """The first class in ``cls``'s MRO (after ``after``, if given) whose body binds ``name``."""
        order = self.mro(cls)
        if after is not None:
            if after not in order:
                return None
            order = order[order.index(after) + 1 :]
        for candidate in order:
            if candidate.defines(name):
                return candidate
        return None

    def descendants(self, cls: ClassInfo) -> list[ClassInfo]:
        """All classes that have ``cls`` in their MRO, except ``cls`` itself (iterative)."""
        out: list[ClassInfo] = []
        seen = {id(cls)}
        stack = list(self.children.get(id(cls), ()))
        while stack:
            child = stack.pop()
            if id(child) in seen:
                continue
            seen.add(id(child))
            out.append(child)
            stack.extend(self.children.get(id(child), ()))
        return out

    def fully_resolved(self, cls: ClassInfo) -> bool:
        """True when no class in the MRO has a base the checker could not resolve."""
        return not any(c.unresolved_bases for c in self.mro(cls))
