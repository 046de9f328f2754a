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

import os
from collections.abc import Callable, Iterable, Iterator
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
from harness.overrides.signature import PROPERTY, ParamKind, Signature
from harness.overrides.summary import ClassSummary, FileSummary, Import

_MAX_DEPTH = 40
_TYPING_FORMS = frozenset({"Generic", "Protocol", "NamedTuple", "TypedDict"})


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
    unresolved: list[str] = field(default_factory=lambda: [])
    """The bases as written that resolve to no class (``MLACommonMetadataBuilder``)."""
    previous: ClassInfo | None = None
    """An earlier class of the same name in the same scope (``class A(A)`` refers to it)."""
    facts: ClassFacts | None = None
    """Dispatch facts (escapes, dynamic dispatch, descriptors, decorators), if any."""
    opaque: set[str] = field(default_factory=lambda: set())
    """Names whose ``def`` a decorator replaced by an object of another kind (still bound by
    the class, no longer compared as methods)."""
    _methods: dict[str, Signature] | None = None
    _bound: frozenset[str] | None = None

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


class Project:
    """The whole scanned tree: modules, classes, bases, MROs and subclasses."""

    def __init__(
        self,
        modules: Iterable[tuple[SourceFile, FileSummary]],
        watch: Iterable[str] = (),
        external: ExternalModules | None = None,
    ) -> None:
        self._watch = frozenset(watch)
        """Module names (of deleted files) whose lookups mark the looking class as affected."""
        self._touched = False
        self._touching: set[tuple[int, str]] = set()
        self.affected: list[ClassInfo] = []
        """Classes whose bases are resolved through a watched module name, found or not:
        the subclasses of what a deleted file defined."""
        self.modules: dict[str, ModuleInfo] = {}
        """Modules by every name they may be imported as (the first file of a name wins)."""
        self.files: list[ModuleInfo] = []
        """One module per file of the tree, in the order given."""
        self.external_files: list[ModuleInfo] = []
        """Modules read from outside the tree to resolve bases, in the order loaded."""
        self.classes: list[ClassInfo] = []
        """Classes of the scanned tree (external ones are in :attr:`external_classes`)."""
        self.external_classes: list[ClassInfo] = []
        self._external = external
        self._missing: set[str] = set()
        for file, summary in modules:
            info = ModuleInfo(file, summary, file.module)
            self.files.append(info)
            self.modules.setdefault(file.module, info)
        for info in self.files:
            for alias in info.file.aliases:
                self.modules.setdefault(alias, info)
            self._index_module(info)
        self._memo: dict[tuple[int, str], Target | None] = {}
        self._by_stem: dict[str, list[tuple[SourceFile, str]]] | None = None
        self._bindings_memo: dict[tuple[int, Binding], tuple[Target | None, bool]] = {}
        pending = list(self.classes)
        while pending:  # resolving a base may load external modules, and so more classes
            loaded = len(self.external_classes)
            for cls in pending:
                self._resolve_bases(cls)
            pending = self.external_classes[loaded:]
        self._up: dict[int, ClassInfo] = {}
        """A class with one usable base: that base (its MRO is the class, then the base's)."""
        self._full: dict[int, tuple[ClassInfo, ...]] = {}
        """A class with several usable bases: its whole C3 MRO."""
        self._broken_ids: set[int] = set()
        self.problems: list[MroProblem] = []
        self._compute_mros()
        self._tin: dict[int, int] = {}
        self._tout: dict[int, int] = {}
        self._root: dict[int, ClassInfo] = {}
        self._label_chains()
        self._resolved: dict[int, bool] = {}
        self.children: dict[int, list[ClassInfo]] = {}
        for cls in self.all_classes():
            for base in cls.bases:
                self.children.setdefault(id(base), []).append(cls)
        self._binders: dict[str, list[ClassInfo]] = {}
        """Name -> the classes whose body binds it (methods and other class attributes)."""
        self._assigners: dict[str, list[ClassInfo]] = {}
        """Name -> the classes that assign ``self.name = ...``."""
        for cls in self.all_classes():
            self._apply_decorators(cls)
            for name in (*cls.summary.method_names, *cls.summary.attributes):
                self._binders.setdefault(name, []).append(cls)
            for name in cls.summary.instance_attributes:
                self._assigners.setdefault(name, []).append(cls)

    def all_classes(self) -> list[ClassInfo]:
        """Classes of the tree, then those of external modules loaded to resolve bases."""
        return [*self.classes, *self.external_classes]

    def all_files(self) -> list[ModuleInfo]:
        """Modules of the tree, then those loaded from outside it."""
        return [*self.files, *self.external_files]

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
            info.members.append(cls)
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
            self._touched = self._touched or key in self._touching
            return self._memo[key]
        self._memo[key] = None  # breaks import cycles
        outer, self._touched = self._touched, False
        result = self._resolve_dotted(module, dotted, 0)
        self._memo[key] = result
        if self._touched:
            self._touching.add(key)
        self._touched = outer or self._touched
        return result

    def _module(self, name: str) -> ModuleInfo | None:
        """The module of that name, else one the external provider can read (loaded once);
        notes a lookup of a watched name (see ``affected``)."""
        if self._watch and any(name == w or name.startswith(w + ".") for w in self._watch):
            self._touched = True
        found = self.modules.get(name)
        if found is not None or self._external is None or not name or name in self._missing:
            return found
        loaded = self._external.module(name)
        if loaded is None:
            self._missing.add(name)
            return None
        file, summary = loaded
        info = ModuleInfo(file, summary, name, external=True)
        self.modules[name] = info
        self.external_files.append(info)
        self._index_module(info)
        return info

    def resolve_class(self, module: ModuleInfo, dotted: str) -> ClassInfo | None:
        """Like :meth:`resolve`, but only classes."""
        target = self.resolve(module, dotted)
        return target if isinstance(target, ClassInfo) else None

    def _resolve_dotted(self, module: ModuleInfo, dotted: str, depth: int) -> Target | None:
        head, *rest = dotted.split(".")
        return self._follow(self._lookup(module, head, depth), rest, depth)

    def _follow(self, target: Target | None, parts: Iterable[str], depth: int) -> Target | None:
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
        sub = self._module(f"{module.name}.{name}")
        if sub is not None:
            return sub
        for star_module, level in module.summary.star_imports:
            target = self._module(self.absolute_module(module, star_module, level))
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

    def _resolve_shadowed(self, module: ModuleInfo, dotted: str) -> Target | None:
        """Resolve ``dotted`` ignoring the module's own class definitions of its head."""
        head, _, rest = dotted.partition(".")
        imp = module.imports.get(head)
        if imp is None:
            return None
        return self._follow(
            self._resolve_import(module, imp, 1), rest.split(".") if rest else (), 1
        )

    def _resolve_bases(self, cls: ClassInfo) -> None:
        self._touched = False
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
            elif base not in (None, "object") and not self._typing_form(cls.module, base):
                cls.unresolved_bases = True
                cls.unresolved.append(base)
        if self._touched:
            self.affected.append(cls)

    def _typing_form(self, module: ModuleInfo, dotted: str) -> bool:
        """``Generic``, ``Protocol``, ``NamedTuple``, ``TypedDict`` (from ``typing`` or
        ``typing_extensions``): bases that add no method a subclass overrides, so a class
        built on them is not missing a base."""
        head, _, rest = dotted.partition(".")
        name = rest or head
        if name not in _TYPING_FORMS:
            return False
        imp = module.imports.get(head)
        if imp is None:
            return False
        source = imp.module if imp.attr is None else f"{imp.module}.{imp.attr}"
        return source.partition(".")[0] in ("typing", "typing_extensions")

    def misrooted(self, cls: ClassInfo) -> list[MisrootedBase]:
        """The unresolved bases of ``cls`` imported from a dotted module name (``pkg.base``)
        that no module of the tree (or outside it) has, while a file of the tree sits at
        that path below some other directory: the scan started below the import root the
        code is written for, and the base's methods went unchecked."""
        out: list[MisrootedBase] = []
        for base in cls.unresolved:
            head, *rest = base.split(".")
            imp = cls.module.imports.get(head)
            if imp is None:
                continue
            module = self.absolute_module(cls.module, imp.module, imp.level)
            dotted = [*module.split("."), *([imp.attr] if imp.attr else []), *rest]
            for end in range(len(dotted), 1, -1):  # the longest module name first
                name = ".".join(dotted[:end])
                if name in self.modules:
                    break
                found = self._file_at(dotted[:end])
                if found is not None:
                    out.append(MisrootedBase(cls, base, name, *found))
                    break
        return out

    def _file_at(self, parts: list[str]) -> tuple[SourceFile, str] | None:
        """A file of the tree whose path ends with ``parts`` (``pkg/base.py`` or
        ``pkg/base/__init__.py``), and the directory above those parts."""
        if self._by_stem is None:
            self._by_stem = {}
            for info in self.files:
                directory, filename = os.path.split(info.file.path)
                stem = filename.rpartition(".")[0]
                if stem == "__init__":
                    directory, stem = os.path.split(directory)
                self._by_stem.setdefault(stem, []).append((info.file, directory))
        for file, directory in self._by_stem.get(parts[-1], ()):
            above = directory
            for part in reversed(parts[:-1]):
                above, name = os.path.split(above)
                if name != part:
                    break
            else:
                return file, above
        return None

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
                return self._follow(inner, rest, 0)
        top = self._class_at(cls.module, qualname.partition(".")[0])
        line = cls.summary.line if top is None else top.summary.line
        for binding in reversed(cls.module.bindings.get(head, ())):
            if binding.line >= line:
                continue
            target = self._binding_target(cls.module, binding, 0)
            if target is not None and target is not cls:
                return self._follow(target, rest, 0)
        return None

    def _binding_target(self, module: ModuleInfo, binding: Binding, depth: int) -> Target | None:
        if binding.cls is not None:
            return binding.cls
        key = (id(module), binding)
        known = self._bindings_memo.get(key)
        if known is not None:
            target, touched = known
            self._touched = self._touched or touched
            return target
        outer, self._touched = self._touched, False
        target = self._bound_to(module, binding, depth)
        self._bindings_memo[key] = (target, self._touched)
        self._touched = outer or self._touched
        return target

    def _bound_to(self, module: ModuleInfo, binding: Binding, depth: int) -> Target | None:
        if binding.imp is not None:
            return self._resolve_import(module, binding.imp, depth + 1)
        if binding.alias is None or depth > _MAX_DEPTH:
            return None
        head, *rest = binding.alias.split(".")
        for earlier in reversed(module.bindings.get(head, ())):
            if earlier.line < binding.line:
                found = self._binding_target(module, earlier, depth + 1)
                if found is not None:
                    return self._follow(found, rest, depth)
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
        cls.replace_methods(methods)

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
            elif isinstance(target, FunctionInfo) and target.wrapper.factory == called:
                sig = _through_wrapper(sig, target.wrapper)
            elif (
                target is None
                and not called
                and self.builtin_name(cls.module, written) in _PROPERTIES
            ):
                sig = sig._replace(decorators=sig.decorators | {PROPERTY})
        return sig

    def builtin_name(self, module: ModuleInfo, name: str, depth: int = 0) -> str | None:
        """The standard-library name that ``name`` stands for in ``module`` through aliases
        and imports (``property`` for ``cache_readonly`` imported from a stub that says
        ``cache_readonly = property``), when the chain ends there."""
        if depth > _MAX_DEPTH or name in module.classes or name in module.functions:
            return None
        alias = module.aliases.get(name)
        if alias is not None and alias != name:
            head, _, last = alias.rpartition(".")
            if head in ("", "builtins", "functools") and last in _PROPERTIES:
                return last
            return None if head else self.builtin_name(module, alias, depth + 1)
        imp = module.imports.get(name)
        if imp is None or imp.attr is None:
            return None
        absolute = self.absolute_module(module, imp.module, imp.level)
        if absolute in ("builtins", "functools"):
            return imp.attr
        source = self._module(absolute)
        return None if source is None else self.builtin_name(source, imp.attr, depth + 1)

    # -- MRO -------------------------------------------------------------------------------

    def mro(self, cls: ClassInfo) -> list[ClassInfo]:
        """C3 linearisation over resolvable bases; ``[cls]`` alone if it is broken."""
        return list(self._walk(cls))

    def _walk(self, cls: ClassInfo) -> Iterator[ClassInfo]:
        """The MRO, lazily: single-base classes are followed up their chain (no per-class
        copy of a long chain is ever stored), several-base classes hold their whole MRO."""
        while True:
            full = self._full.get(id(cls))
            if full is not None:
                yield from full
                return
            yield cls
            up = self._up.get(id(cls))
            if up is None:
                return
            cls = up

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
        if id(problem.cls) not in self._broken_ids:
            self._broken_ids.add(id(problem.cls))
            self.problems.append(problem)

    def _linearize(self, cls: ClassInfo) -> None:
        if id(cls) in self._broken_ids:
            return
        bases = [b for b in cls.bases if id(b) not in self._broken_ids]
        if len(bases) == 1:
            self._up[id(cls)] = bases[0]  # C3 of one base is that base's MRO
        elif bases:
            merged = _c3([*(self.mro(b) for b in bases), bases])
            if merged is None:
                self._broken(NoLinearization(cls, tuple(bases)))
            else:
                self._full[id(cls)] = (cls, *merged)

    def _label_chains(self) -> None:
        """Number the single-base chains depth first (``_tin``/``_tout``), so that "is ``c`` on
        ``x``'s chain" is two comparisons; ``_root`` is where each chain ends."""
        below: dict[int, list[ClassInfo]] = {}
        classes = self.all_classes()
        for cls in classes:
            up = self._up.get(id(cls))
            if up is not None:
                below.setdefault(id(up), []).append(cls)
        clock = 0
        for root in classes:
            if id(root) in self._up:
                continue
            stack: list[tuple[ClassInfo, bool]] = [(root, False)]
            while stack:
                cls, leaving = stack.pop()
                if leaving:
                    self._tout[id(cls)] = clock
                    continue
                self._tin[id(cls)] = clock
                self._root[id(cls)] = root
                clock += 1
                stack.append((cls, True))
                stack.extend((child, False) for child in below.get(id(cls), ()))

    def release(self) -> None:
        """Break the class <-> module reference cycles so memory is freed at once by reference
        counting, without a cyclic garbage collection pass over the whole tree."""
        for cls in self.all_classes():
            cls.bases.clear()
            cls.nested.clear()
            cls.previous = None
        for module in self.all_files():
            module.classes.clear()
            module.members.clear()
            module.bindings.clear()
        for table in (self.children, self._memo, self._up, self._full, self._binders):
            table.clear()
        self._assigners.clear()
        self._root.clear()

    # -- queries ---------------------------------------------------------------------------

    def in_mro(self, candidate: ClassInfo, cls: ClassInfo) -> bool:
        """Whether ``candidate`` is in ``cls``'s MRO (``cls`` itself included): O(1) on
        single-base chains, a scan of the stored MRO where several bases meet."""
        if candidate is cls:
            return True
        tin = self._tin.get(id(cls))
        low = self._tin.get(id(candidate))
        if tin is None or low is None:
            return False
        if low <= tin < self._tout[id(candidate)]:
            return True  # on the single-base chain from cls up to its end
        full = self._full.get(id(self._root[id(cls)]))
        return full is not None and candidate in full  # identity scan of a stored tuple

    def _first(
        self,
        cls: ClassInfo,
        among: list[ClassInfo],
        after: ClassInfo | None,
        test: Callable[[ClassInfo], bool],
    ) -> ClassInfo | None:
        """The first class of ``among`` (the classes passing ``test``) in ``cls``'s MRO after
        ``after`` (from the start if ``None``): few are tested for membership, else the MRO is
        walked until one passes."""
        if len(among) <= _FEW and (after is None or after is cls):
            found = [c for c in among if c is not after and self.in_mro(c, cls)]
            if len(found) <= 1:
                return found[0] if found else None
        seeking = after is None
        for candidate in self._walk(cls):
            if seeking and test(candidate):
                return candidate
            seeking = seeking or candidate is after
        return None

    def definer(
        self, cls: ClassInfo, name: str, after: ClassInfo | None = None
    ) -> ClassInfo | None:
        """The first class in ``cls``'s MRO (after ``after``, if given) whose body binds ``name``."""
        binders = self._binders.get(name)
        if binders is None:
            return None
        return self._first(cls, binders, after, lambda c: c.defines(name))

    def shadowed(self, cls: ClassInfo, name: str) -> bool:
        """True if some class in the MRO assigns ``self.name = ...``: the instance attribute,
        not the method, is what ``obj.name(...)`` calls."""
        assigners = self._assigners.get(name)
        if assigners is None:
            return False
        test: Callable[[ClassInfo], bool] = lambda c: name in c.summary.instance_attributes  # noqa: E731
        return self._first(cls, assigners, None, test) is not None

    def inheritors(self, cls: ClassInfo, name: str) -> list[ClassInfo]:
        """``cls`` and its descendants whose ``name`` is ``cls``'s definition.

        A descendant that binds ``name`` itself, or gets it from another base first, hides
        ``cls``'s definition from all of its own descendants too (C3 keeps their order), so
        the walk stops there.
        """
        out = [cls]
        seen = {id(cls)}
        stack = list(self.children.get(id(cls), ()))
        while stack:
            child = stack.pop()
            if id(child) in seen:
                continue
            seen.add(id(child))
            if child.defines(name) or self.definer(child, name) is not cls:
                continue
            out.append(child)
            stack.extend(self.children.get(id(child), ()))
        return out

    def descendants(self, *classes: ClassInfo) -> list[ClassInfo]:
        """All classes that have one of ``classes`` in their MRO, except those given."""
        out: list[ClassInfo] = []
        seen = {id(c) for c in classes}
        stack = [child for cls in classes for child in self.children.get(id(cls), ())]
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
        known = self._resolved.get(id(cls))
        if known is None:
            known = self._resolved[id(cls)] = not any(c.unresolved_bases for c in self._walk(cls))
        return known


_FEW = 4
"""Up to this many candidate classes are tested for MRO membership instead of walking the MRO."""


def _c3(sequences: list[list[ClassInfo]]) -> list[ClassInfo] | None:
    """C3 merge in time linear in the sequences' total length; ``None`` if no order exists.

    A class may be taken when it heads some sequence and sits in no sequence's tail; the
    tail counts are kept up to date as the heads advance.
    """
    tails: dict[int, int] = {}
    for seq in sequences:
        for cls in seq[1:]:
            tails[id(cls)] = tails.get(id(cls), 0) + 1
    heads = [0] * len(sequences)
    out: list[ClassInfo] = []
    while True:
        head: ClassInfo | None = None
        exhausted = True
        for seq, at in zip(sequences, heads, strict=True):
            if at < len(seq):
                exhausted = False
                if not tails.get(id(seq[at])):
                    head = seq[at]
                    break
        if head is None:
            return out if exhausted else None
        out.append(head)
        for i, seq in enumerate(sequences):
            at = heads[i]
            if at < len(seq) and seq[at] is head:
                heads[i] = at = at + 1
                if at < len(seq):
                    tails[id(seq[at])] -= 1


_PROPERTIES = frozenset({"property", "cached_property"})


def _through_wrapper(sig: Signature, wrapper: Wrapper) -> Signature:
    """What a call of ``sig``'s method accepts once ``wrapper`` replaces it: the wrapper's
    own parameters, or for a pass-through (``*args, **kwargs``) the method's, plus the
    keywords the wrapper consumes (its keyword-only parameters)."""
    if not wrapper.passthrough:
        return sig._replace(params=wrapper.params)
    names = {p.name for p in sig.params}
    consumed = [
        p for p in wrapper.params if p.kind is ParamKind.KEYWORD_ONLY and p.name not in names
    ]
    if not consumed:
        return sig
    if any(p.kind is ParamKind.VAR_KEYWORD for p in sig.params):
        return sig  # the method takes any keyword already
    return sig._replace(params=(*sig.params, *consumed))
