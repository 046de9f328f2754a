"""Name binding: what each name of each module of the tree is bound to, and classes' bases.

Classes, module-level aliases, imports (relative, ``as``, re-exports), submodules and star imports
are followed. A base is resolved as when the ``class`` statement runs: the binding in force at that
line, the enclosing class body first. Anything else is unresolvable and skipped.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterable, Mapping

from harness.overrides.discover import SourceFile, absolute_module
from harness.overrides.model.tree import (
    Binding,
    ClassInfo,
    ExternalModules,
    FunctionInfo,
    MisrootedBase,
    ModuleInfo,
    Target,
)
from harness.overrides.summary import FileSummary, Import

_MAX_DEPTH = 40
_TYPING_FORMS = frozenset({"Generic", "Protocol", "NamedTuple", "TypedDict"})
PROPERTY_BUILTINS = frozenset({"property", "cached_property"})
"""Standard-library decorators (``builtins``, ``functools``) that make a method a property."""


class NameBinding:
    """The modules of the tree (and those loaded from outside it), their classes, and what
    every dotted name used in them resolves to; each class's bases resolved on construction."""

    def __init__(
        self,
        modules: Iterable[tuple[SourceFile, FileSummary]],
        watch: Iterable[str] = (),
        external: ExternalModules | None = None,
        sources: Mapping[str, bytes] | None = None,
    ) -> None:
        self._sources = sources or {}
        """The bytes of the tree's files by path, as the run read them."""
        self._watch = frozenset(watch)
        """Module names (of deleted files) whose lookups mark the looking class as affected."""
        self._touched = False
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
        """Module names the external provider has no source for."""
        for file, summary in modules:
            info = ModuleInfo(file, summary, file.module)
            self.files.append(info)
            self.modules.setdefault(file.module, info)
        for info in self.files:
            for alias in info.file.aliases:
                self.modules.setdefault(alias, info)
            self._index_module(info)
        self._memo: dict[tuple[int, str | Binding], tuple[Target | None, bool]] = {}
        """``(id(module), dotted name or binding)`` -> what it names at the top level of that
        module, and whether its lookup went through a watched module name."""
        self._files_by_stem: dict[str, list[tuple[SourceFile, str]]] | None = None
        """File name without ``.py`` (a package's directory name) -> the files and their
        directories (built on the first :meth:`misrooted` lookup)."""
        pending = list(self.classes)
        while pending:  # resolving a base may load external modules, and so more classes
            loaded = len(self.external_classes)
            for cls in pending:
                self._resolve_bases(cls)
            pending = self.external_classes[loaded:]

    def text(self, path: str) -> str | None:
        """The text of the file at ``path`` (UTF-8, undecodable bytes replaced, newlines
        universal): the bytes the run read, else read now; ``None`` when it cannot be read."""
        data = self._sources.get(path)
        if data is None:
            try:
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                return None
        text = data.decode("utf-8", "replace")
        return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text

    def all_classes(self) -> list[ClassInfo]:
        """Classes of the tree, then those of external modules loaded to resolve bases."""
        return [*self.classes, *self.external_classes]

    def all_files(self) -> list[ModuleInfo]:
        """Modules of the tree, then those loaded from outside it."""
        return [*self.files, *self.external_files]

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
        ref = weakref.ref(info)
        by_qualname: dict[str, ClassInfo] = {}
        for cls_summary in summary.classes:
            cls = ClassInfo(f"{info.name}.{cls_summary.qualname}", ref, cls_summary)
            cls.facts = facts.get(cls_summary.qualname)
            cls.previous = by_qualname.get(cls_summary.qualname)
            if cls.previous is not None:
                cls.key = f"{cls.key}@{cls_summary.line}"
            (self.external_classes if info.external else self.classes).append(cls)
            info.members.append(cls)
            by_qualname[cls_summary.qualname] = cls
            outer, _, name = cls_summary.qualname.rpartition(".")
            if not outer:
                info.classes[name] = cls
                info.aliases.pop(name, None)
                bindings.append((name, Binding(cls_summary.line, cls=cls)))
            elif outer in by_qualname:
                by_qualname[outer].nested[name] = cls
        bindings.sort(key=lambda item: item[1].line)
        for name, binding in bindings:
            info.bindings.setdefault(name, []).append(binding)

    # -- name resolution -------------------------------------------------------------------

    def absolute_module(self, module: ModuleInfo, name: str, level: int) -> str:
        """Absolute module name of ``from {'.' * level}{name} import ...`` in ``module``."""
        return absolute_module(module.name, module.file.is_package, name, level)

    def resolve(self, module: ModuleInfo, dotted: str) -> Target | None:
        """What ``dotted`` names at the top level of ``module``, if it is in the tree."""
        return self._memoized((id(module), dotted), lambda: self._resolve_dotted(module, dotted, 0))

    def _memoized(
        self, key: tuple[int, str | Binding], compute: Callable[[], Target | None]
    ) -> Target | None:
        """``compute()`` once per ``key``; a lookup that went through a watched module name
        marks every lookup it is part of (``None`` while it runs: import cycles end there)."""
        known = self._memo.get(key)
        if known is not None:
            self._touched = self._touched or known[1]
            return known[0]
        self._memo[key] = (None, False)
        outer, self._touched = self._touched, False
        target = compute()
        self._memo[key] = (target, self._touched)
        self._touched = outer or self._touched
        return target

    def builtin_name(self, module: ModuleInfo, name: str, depth: int = 0) -> str | None:
        """The standard-library name that ``name`` stands for in ``module`` through aliases and
        imports (``property`` for ``readonly`` from a module saying ``readonly = property``)."""
        if depth > _MAX_DEPTH or name in module.classes or name in module.functions:
            return None
        alias = module.aliases.get(name)
        if alias is not None and alias != name:
            head, _, last = alias.rpartition(".")
            if head in ("", "builtins", "functools") and last in PROPERTY_BUILTINS:
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

    def function_home(self, module: ModuleInfo, dotted: str) -> tuple[ModuleInfo, str] | None:
        """The module whose top level may define the function ``dotted`` names in ``module``, and
        its name there, through re-exporting imports."""
        head, _, name = dotted.rpartition(".")
        where = self.resolve(module, head) if head else module
        for _ in range(_MAX_DEPTH):
            if not isinstance(where, ModuleInfo):
                return None
            imp = where.imports.get(name)
            if imp is None:
                return where, name
            if imp.attr is None:
                return None  # `import m as name`: a module, not a function
            where, name = self._module(self.absolute_module(where, imp.module, imp.level)), imp.attr
        return None

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
        source = self._module(absolute)
        if imp.attr is None or source is None:
            return source
        own = source is module and imp.attr == imp.name  # `from . import x` in x's package
        found = None if own else self._lookup(source, imp.attr, depth + 1)
        return found or self._module(f"{absolute}.{imp.attr}")

    def _resolve_shadowed(self, module: ModuleInfo, dotted: str) -> Target | None:
        """Resolve ``dotted`` ignoring the module's own class definitions of its head."""
        head, *rest = dotted.split(".")
        imp = module.imports.get(head)
        if imp is None:
            return None
        return self._follow(self._resolve_import(module, imp, 1), rest, 1)

    def _resolve_bases(self, cls: ClassInfo) -> None:
        self._touched = False
        for base in cls.summary.bases:
            if base is None:
                continue
            target = self._at_definition(cls, base) or self.resolve(cls.module, base)
            if target is cls:
                # `class A(A)` refers to whatever `A` was bound to before: an earlier class
                # of that name, or an import (`from .llama import A` then `class A(A)`).
                target = cls.previous or self._resolve_shadowed(cls.module, base) or cls
            if isinstance(target, ClassInfo):
                cls.bases.append(target)
                lines = self._other_bindings(cls, base, target)
                if lines:
                    cls.alternatives.append((target, base, lines))
            elif base != "object" and not self._typing_form(cls.module, base):
                cls.unresolved_bases = True
                cls.unresolved.append(base)
        if self._touched:
            self.affected.append(cls)

    def _typing_form(self, module: ModuleInfo, dotted: str) -> bool:
        """``Generic``, ``Protocol``, ``NamedTuple``, ``TypedDict`` (from ``typing`` or
        ``typing_extensions``): bases that add no method a subclass overrides, so a class
        built on them is not missing a base."""
        head, _, rest = dotted.partition(".")
        imp = module.imports.get(head)
        if (rest or head) not in _TYPING_FORMS or imp is None:
            return False
        return imp.module.partition(".")[0] in ("typing", "typing_extensions")

    def misrooted(self, cls: ClassInfo) -> list[MisrootedBase]:
        """The unresolved bases of ``cls`` imported from a dotted module no module has, while a tree
        file sits at that path below another directory (the scan started below the code's import
        root)."""
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
        if self._files_by_stem is None:
            self._files_by_stem = {}
            for info in self.files:
                directory, filename = os.path.split(info.file.path)
                stem = filename.rpartition(".")[0]
                if stem == "__init__":
                    directory, stem = os.path.split(directory)
                self._files_by_stem.setdefault(stem, []).append((info.file, directory))
        for file, directory in self._files_by_stem.get(parts[-1], ()):
            above = directory
            for part in reversed(parts[:-1]):
                above, name = os.path.split(above)
                if name != part:
                    break
            else:
                return file, above
        return None

    def _at_definition(self, cls: ClassInfo, dotted: str) -> Target | None:
        """What ``dotted`` named when ``cls``'s statement ran (the enclosing class body first, else
        the latest top-level binding above it); ``None`` when unknown: use :meth:`resolve`."""
        head, *rest = dotted.split(".")
        qualname = cls.summary.qualname
        outer = qualname.rpartition(".")[0]
        if outer:
            first, *inside = outer.split(".")
            enclosing = self._follow(cls.module.classes.get(first), inside, 0)
            inner = enclosing.nested.get(head) if isinstance(enclosing, ClassInfo) else None
            if inner is not None and inner.summary.line < cls.summary.line:
                return self._follow(inner, rest, 0)
        top = cls.module.classes.get(qualname.partition(".")[0])
        line = cls.summary.line if top is None else top.summary.line
        for binding in reversed(cls.module.bindings.get(head, ())):
            if binding.line >= line:
                continue
            target = self._binding_target(cls.module, binding, 0)
            if target is not None and target is not cls:
                return self._follow(target, rest, 0)
        return None

    def _other_bindings(self, cls: ClassInfo, dotted: str, read: ClassInfo) -> tuple[int, ...]:
        """The lines of the top-level bindings of ``dotted``'s first name above ``cls``'s
        statement, when one of them names something other than ``read`` (a base picked by
        the branch that ran: ``if``/``elif`` or ``try``/``except`` imports); ``()`` else."""
        if "." in cls.summary.qualname:
            return ()  # a nested class: its enclosing body's bindings are not indexed
        head, *rest = dotted.split(".")
        earlier = [b for b in cls.module.bindings.get(head, ()) if b.line < cls.summary.line]
        if len(earlier) < 2:
            return ()
        for binding in earlier:
            target = self._binding_target(cls.module, binding, 0)
            if self._follow(target, rest, 0) is not read:
                return tuple(b.line for b in earlier)
        return ()

    def _binding_target(self, module: ModuleInfo, binding: Binding, depth: int) -> Target | None:
        if binding.cls is not None:
            return binding.cls
        return self._memoized((id(module), binding), lambda: self._bound_to(module, binding, depth))

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
