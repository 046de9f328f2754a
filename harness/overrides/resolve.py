"""Resolve names to classes across the tree and compute C3 method resolution orders.

Resolution follows what the source says: classes defined in a module, module-level aliases
(``X = Y``), imports (absolute, relative, ``as`` aliases, re-exports through ``__init__``),
submodules and star imports. Anything else (third-party and builtin classes, computed bases)
is unresolvable and silently skipped. All walks are iterative or depth-bounded.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from harness.overrides.discover import SourceFile
from harness.overrides.signature import Signature
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
        return name in self.methods or name in self.summary.attributes


Target = ClassInfo | ModuleInfo


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

    def __init__(self, modules: Iterable[tuple[SourceFile, FileSummary]]) -> None:
        self.modules: dict[str, ModuleInfo] = {}
        self.classes: list[ClassInfo] = []
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
        for cls in self.classes:
            self._resolve_bases(cls)
        self._mro: dict[int, list[ClassInfo]] = {}
        self.problems: list[MroProblem] = []
        self._compute_mros()
        self.children: dict[int, list[ClassInfo]] = {}
        for cls in self.classes:
            for base in cls.bases:
                self.children.setdefault(id(base), []).append(cls)

    # -- indexing --------------------------------------------------------------------------

    def _index_module(self, info: ModuleInfo) -> None:
        summary = info.summary
        for imp in summary.imports:
            info.imports[imp.name] = imp
        for name, target in summary.aliases:
            info.aliases[name] = target
        by_qualname: dict[str, ClassInfo] = {}
        for cls_summary in summary.classes:
            cls = ClassInfo(f"{info.name}.{cls_summary.qualname}", info, cls_summary)
            if cls_summary.qualname in by_qualname:
                cls.key = f"{cls.key}@{cls_summary.line}"
            self.classes.append(cls)
            previous = by_qualname.get(cls_summary.qualname)
            by_qualname[cls_summary.qualname] = cls
            outer, _, name = cls_summary.qualname.rpartition(".")
            if not outer:
                info.classes[name] = cls
                info.aliases.pop(name, None)
            elif outer in by_qualname:
                by_qualname[outer].nested[name] = cls
            cls.previous = previous

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
        for part in rest:
            if target is None:
                return None
            if isinstance(target, ClassInfo):
                target = target.nested.get(part)
            else:
                target = self._lookup(target, part, depth + 1)
        return target

    def _lookup(self, module: ModuleInfo, name: str, depth: int) -> Target | None:
        if depth > _MAX_DEPTH:
            return None
        cls = module.classes.get(name)
        if cls is not None:
            return cls
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
            return self.modules.get(absolute)
        source = self.modules.get(absolute)
        if source is None:
            return None
        if source is module and imp.attr == imp.name:
            return self.modules.get(f"{absolute}.{imp.attr}")
        found = self._lookup(source, imp.attr, depth + 1)
        if found is None:
            return self.modules.get(f"{absolute}.{imp.attr}")
        return found

    def _resolve_shadowed(self, module: ModuleInfo, dotted: str) -> Target | None:
        """Resolve ``dotted`` ignoring the module's own class definitions of its head."""
        head, _, rest = dotted.partition(".")
        imp = module.imports.get(head)
        if imp is None:
            return None
        target = self._resolve_import(module, imp, 1)
        for part in rest.split(".") if rest else ():
            if target is None:
                return None
            target = (
                target.nested.get(part)
                if isinstance(target, ClassInfo)
                else self._lookup(target, part, 1)
            )
        return target

    def _resolve_bases(self, cls: ClassInfo) -> None:
        for base in cls.summary.bases:
            target = None if base is None else self.resolve(cls.module, base)
            if target is cls and base is not None:
                # `class A(A)` refers to whatever `A` was bound to before: an earlier class
                # of that name, or an import (`from .llama import A` then `class A(A)`).
                target = cls.previous or self._resolve_shadowed(cls.module, base) or cls
            if isinstance(target, ClassInfo):
                cls.bases.append(target)
            elif base not in (None, "object"):
                cls.unresolved_bases = True

    # -- MRO -------------------------------------------------------------------------------

    def mro(self, cls: ClassInfo) -> list[ClassInfo]:
        """C3 linearisation over resolvable bases; ``[cls]`` alone if it is broken."""
        return self._mro.get(id(cls), [cls])

    def _compute_mros(self) -> None:
        """Post-order over the base graph (iterative), detecting cycles on the way."""
        state: dict[int, int] = {}  # 1 = on stack, 2 = done
        for start in self.classes:
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
        for cls in self.classes:
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
