"""Modules outside the scanned tree: the standard library and installed packages, read from
the source files the running interpreter would import, without importing anything.

A base class such as ``threading.Thread`` or ``torch.nn.Module`` is resolved by finding its
module the way ``import`` would, but only with :class:`importlib.machinery.PathFinder` over
``sys.path``, one dotted component at a time: no package ``__init__`` runs, no meta-path
hook is consulted. The module's ``.py`` file is summarised like a file of the tree, and
cached by content hash the same way, once per machine
(:class:`~harness.overrides.cache.InstalledCache`). A module with no Python source (a C
extension, a built-in module) is read from a type stub instead, when one exists: ``name.pyi`` beside it,
a ``<package>-stubs`` distribution, or the standard-library stubs of an installed typeshed
(mypy ships one). Classes of such modules are never checked themselves; they provide bases,
signatures and call sites. Every file read is recorded (:attr:`InstalledModules.used`), so
that a stored result is reused only while those files are unchanged.

A module of the tree's own top-level packages that the scanned paths leave out (``pkg.base``
when only ``pkg/sub.py`` is passed, or ``vllm.attention.abstract`` when only ``vllm/v1`` is)
is never looked up on ``sys.path``: it is read the same way from beside the tree, under the
import roots that name the scanned files, so a base defined there still gives its signatures
and call sites instead of silently leaving the subclass unchecked.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec, PathFinder

from harness.overrides.cache import BlobStore, digest, summary_of
from harness.overrides.discover import SourceFile, display_path
from harness.overrides.summary import FileSummary

_NOT_READ = frozenset({"typing", "typing_extensions"})
"""Modules whose classes (``Generic``, ``Protocol``...) shape types, not methods: reading
them (the largest of the standard library) would add nothing to a check."""


class InstalledModules:
    """Reads modules that are not in the scanned tree; see the module docstring."""

    def __init__(
        self,
        cache: BlobStore,
        tree: Sequence[str],
        local: Sequence[str] = (),
        *,
        import_roots: Callable[[], Sequence[str]] = tuple,
        local_cache: BlobStore | None = None,
        cwd: str | None = None,
    ) -> None:
        """``tree``: top-level module names the scanned tree defines (never looked up on
        ``sys.path``). ``local``: directories whose modules are not "installed" (the scanned
        roots and the working directory), left out of the search path. ``import_roots``:
        gives the directories that name the scanned files (asked once, on the first lookup
        there), where modules of ``tree`` that were not scanned are read from (summaries
        kept in ``local_cache``, else ``cache``; paths shown relative to ``cwd``)."""
        self.cache = cache
        self.tree = frozenset(tree)
        self._import_roots = import_roots
        self._roots: list[str] | None = None
        self.local_cache = local_cache or cache
        self.cwd = cwd
        skip = {os.path.realpath(p) for p in local}
        self.search = [
            p
            for p in sys.path
            if p and os.path.isabs(p) and os.path.realpath(p) not in skip and os.path.isdir(p)
        ]
        self.used: list[tuple[str, str]] = []
        """``(path, content hash)`` of every file read."""
        self._specs: dict[str, ModuleSpec | None] = {}
        self._typeshed: str | bool | None = False

    def module(self, name: str) -> tuple[SourceFile, FileSummary] | None:
        """The file and summary of module ``name``, or ``None``."""
        top = name.partition(".")[0]
        if not name or top in _NOT_READ:
            return None
        local = top in self.tree
        found = self._beside_tree(name) if local else self._source(name)
        if found is None:
            return None
        path, is_package = found
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        self.used.append((path, digest(data)))
        summary = summary_of(data, self.local_cache if local else self.cache)
        if summary is None:
            return None
        real = os.path.realpath(path)
        shown = display_path(path, self.cwd) if local else path
        return SourceFile(path, shown, name, is_package, (), real), summary

    def _beside_tree(self, name: str) -> tuple[str, bool] | None:
        """``(path, is package)`` of module ``name`` under the first import root holding it
        (a regular or namespace package's ``.py`` file, or a stub)."""
        parts = name.split(".")
        if not all(p.isidentifier() for p in parts):
            return None
        if self._roots is None:
            self._roots = list(dict.fromkeys(os.path.abspath(r) for r in self._import_roots()))
        for root in self._roots:
            base = os.path.join(root, *parts)
            for suffix in (".py", ".pyi"):
                if os.path.isfile(os.path.join(base, f"__init__{suffix}")):
                    return os.path.join(base, f"__init__{suffix}"), True
                if os.path.isfile(base + suffix):
                    return base + suffix, False
        return None

    # -- finding files -----------------------------------------------------------------------

    def _spec(self, name: str) -> ModuleSpec | None:
        if name in self._specs:
            return self._specs[name]
        parent, _, _ = name.rpartition(".")
        spec: ModuleSpec | None = None
        try:
            if not parent:
                spec = PathFinder.find_spec(name, self.search)
            else:
                outer = self._spec(parent)
                locations = None if outer is None else outer.submodule_search_locations
                if locations:
                    spec = PathFinder.find_spec(name, list(locations))
        except (ImportError, OSError, ValueError):
            spec = None
        self._specs[name] = spec
        return spec

    def _source(self, name: str) -> tuple[str, bool] | None:
        """``(path, is package)`` of the module's Python source or stub."""
        spec = self._spec(name)
        origin = None if spec is None else spec.origin
        is_package = spec is not None and spec.submodule_search_locations is not None
        if origin and origin.endswith((".py", ".pyi")) and os.path.isfile(origin):
            return origin, is_package
        if origin and os.path.isfile(origin):  # an extension module: a stub beside it
            stub = os.path.join(os.path.dirname(origin), name.rpartition(".")[2] + ".pyi")
            if os.path.isfile(stub):
                return stub, False
        return self._stub(name)

    def _stub(self, name: str) -> tuple[str, bool] | None:
        top, _, rest = name.partition(".")
        parts = rest.split(".") if rest else []
        roots: list[str] = []
        stubs = self._spec(f"{top}-stubs") if top.isidentifier() else None
        if stubs is not None and stubs.submodule_search_locations:
            roots.extend(os.path.dirname(p) for p in stubs.submodule_search_locations)
            top = f"{top}-stubs"
        elif top in sys.stdlib_module_names:
            typeshed = self._typeshed_stdlib()
            if typeshed is not None:
                roots.append(typeshed)
        for root in roots:
            base = os.path.join(root, top, *parts)
            if os.path.isfile(os.path.join(base, "__init__.pyi")):
                return os.path.join(base, "__init__.pyi"), True
            if os.path.isfile(base + ".pyi"):
                return base + ".pyi", False
        return None

    def _typeshed_stdlib(self) -> str | None:
        """The standard-library stubs of an installed typeshed copy (mypy's), if any."""
        if self._typeshed is False:
            self._typeshed = None
            spec = self._spec("mypy")
            for location in (spec.submodule_search_locations or []) if spec else []:
                candidate = os.path.join(location, "typeshed", "stdlib")
                if os.path.isdir(candidate):
                    self._typeshed = candidate
                    break
        return self._typeshed if isinstance(self._typeshed, str) else None
