"""Modules outside the scanned tree, read from source files without importing anything.

The standard library is the running interpreter's; installed packages come only from an environment
the user names (``--python``), never from what is installed beside the checker. Modules are found
as ``import`` would (:class:`importlib.machinery.PathFinder`, no ``__init__`` runs) or from stubs,
summarised like the tree's files and cached per machine; every file read is recorded.
"""

from __future__ import annotations

import functools
import os
import platform
import sys
import sysconfig
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec, PathFinder
from typing import TYPE_CHECKING, NamedTuple

from harness.overrides.cache import BlobStore, digest, summary_of
from harness.overrides.discover import SourceFile, absolute_module, display_path

if TYPE_CHECKING:  # a warm run finds its environment without importing the summariser
    from harness.overrides.summary import FileSummary

_NOT_READ = frozenset({"typing", "typing_extensions"})
"""Modules whose classes (``Generic``, ``Protocol``...) shape types, not methods: reading
them (the largest of the standard library) would add nothing to a check."""


class Environment(NamedTuple):
    """Where modules outside the tree are read from."""

    search: tuple[str, ...]
    """Directories searched, in order."""
    version: str
    """The Python version whose standard library is read (``3.11.7``)."""
    named: str | None
    """The environment the user named (``--python``), or ``None``: the standard library only."""

    def describe(self) -> str:
        """One line for the report: what was read."""
        if self.named is None:
            return (
                f"bases read from the Python {self.version} standard library only "
                "(installed packages are read with --python)"
            )
        return f"bases read from the Python {self.version} environment {self.named}"


_PROBE = "import json, platform, sys; print(json.dumps([sys.path, platform.python_version()]))"


def _stdlib() -> list[str]:
    paths = sysconfig.get_paths()
    out = (paths["stdlib"], paths["platstdlib"], os.path.join(paths["platstdlib"], "lib-dynload"))
    return list(dict.fromkeys(os.path.abspath(p) for p in out if os.path.isdir(p)))


def _interpreter_of(directory: str) -> str | None:
    for rel in (("bin", "python3"), ("bin", "python"), ("Scripts", "python.exe")):
        candidate = os.path.join(directory, *rel)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def environment(python: str | None, base: str | None = None) -> Environment:
    """The search path for modules outside the tree: the standard library alone when ``python`` is
    ``None``, else that of the interpreter, virtual environment or package directory it names
    (relative to ``base``). ``ValueError`` with a one-line reason when it names nothing usable."""
    if python is None:
        return Environment(tuple(_stdlib()), platform.python_version(), None)
    if not python.strip():
        raise ValueError(
            "--python is empty: name an interpreter, a virtual environment or a directory "
            "(is a CI variable unset?)"
        )
    path = os.path.abspath(os.path.join(base or os.getcwd(), os.path.expanduser(python)))
    executable = path if os.path.isfile(path) else None
    if executable is None and os.path.isdir(path):
        executable = _interpreter_of(path)
        if executable is None:  # a directory of packages
            return Environment((*_stdlib(), path), platform.python_version(), python)
    if executable is None:
        raise ValueError(f"--python {python}: no such interpreter or directory")
    import json
    import subprocess

    try:
        done = subprocess.run(
            [executable, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60
        )
        found, version = json.loads(done.stdout)
    except (OSError, ValueError, subprocess.SubprocessError):
        raise ValueError(f"--python {python}: not a Python interpreter that runs") from None
    search = tuple(
        os.path.abspath(p) for p in found if isinstance(p, str) and p and os.path.isdir(p)
    )
    return Environment(search, str(version), python)


_INSTALLATION_DIRECTORIES = frozenset({"site-packages", "dist-packages"})
"""Directories whose packages are installed ones, never read as the project's own."""


_Read = tuple["tuple[SourceFile, FileSummary] | None", "tuple[str, str] | None"]


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
        env: Environment | None = None,
    ) -> None:
        """``tree``: the tree's top-level module names (never looked up on the search path);
        ``local``: directories left out of the search path; ``import_roots``: where unscanned
        modules of ``tree`` are read from; ``env``: the search path (:func:`environment`)."""
        self.cache = cache
        self.tree = frozenset(tree)
        self._import_roots = import_roots
        self._roots: list[str] | None = None
        self._listings: dict[str, frozenset[str] | None] = {}
        self.local_cache = local_cache or cache
        self.cwd = cwd
        skip = {os.path.realpath(p) for p in local}
        self.env = env or environment(None)
        self.search = [
            p
            for p in self.env.search
            if p and os.path.isabs(p) and os.path.realpath(p) not in skip and os.path.isdir(p)
        ]
        self.used: list[tuple[str, str]] = []
        """``(path, content hash)`` of every file read."""
        self._spec = functools.cache(self._find_spec)
        self._read: dict[str, _Read] = {}
        """What :meth:`_load` gave for each module name."""
        self._followed: set[tuple[str, str | None]] = set()

    def module(self, name: str) -> tuple[SourceFile, FileSummary] | None:
        """The file and summary of module ``name``, or ``None``."""
        if name not in self._read:
            self._read[name] = self._load(name)
        found, used = self._read[name]
        if used is not None:
            self.used.append(used)
        return found

    def read_ahead(self, summary: FileSummary, name: str = "", is_package: bool = False) -> None:
        """Read now, as :meth:`module` would later, the modules outside the tree that the bases
        of ``summary``'s classes (module ``name``'s) are imported from, and theirs in turn: called
        while worker processes summarise the tree, so that this work overlaps theirs."""
        imports = {imp.name: imp for imp in summary.imports}
        for cls in summary.classes:
            for base in cls.bases:
                head, _, rest = (base or "").partition(".")
                imp = imports.get(head)
                if imp is not None and (imp.level == 0 or name):
                    module = absolute_module(name, is_package, imp.module, imp.level)
                    self._ahead(module, imp.attr or rest.partition(".")[0])

    def _ahead(self, name: str, attr: str | None) -> None:
        """Read module ``name`` ahead, and the modules it takes ``attr`` from."""
        if name.partition(".")[0] in self.tree or (name, attr) in self._followed:
            return  # the tree's own modules are being summarised
        self._followed.add((name, attr))
        seen = name in self._read
        if not seen:
            self._read[name] = self._load(name)
        found = self._read[name][0]
        if found is None:
            return
        file, summary = found
        if not seen:
            self.read_ahead(summary, name, file.is_package)
        imp = next((i for i in summary.imports if i.name == attr), None)
        again = [(imp.module, imp.level, imp.attr)] if imp else []  # `from ._base import C`
        again += [(m, level, attr) for m, level in summary.star_imports if attr and not imp]
        for module, level, name_there in again:
            self._ahead(absolute_module(name, file.is_package, module, level), name_there)

    def _load(self, name: str) -> _Read:
        """The file and summary of module ``name`` (or ``None``), and ``(path, content hash)``
        of the file read (``None`` when none was)."""
        top = name.partition(".")[0]
        if not name or top in _NOT_READ:
            return None, None
        local = top in self.tree
        found = self._beside_tree(name) if local else self._source(name)
        if found is None and not local:  # a module of the project the scanned paths left out
            found = self._beside_tree(name, project_only=True)
            local = found is not None
        if found is None:
            return None, None
        path, is_package = found
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            return None, None
        used = (path, digest(data))
        summary = summary_of(data, self.local_cache if local else self.cache)
        if summary is None:
            return None, used
        real = os.path.realpath(path)
        shown = display_path(path, self.cwd) if local else path
        return (SourceFile(path, shown, name, is_package, (), real), summary), used

    def _beside_tree(self, name: str, project_only: bool = False) -> tuple[str, bool] | None:
        """``(path, is package)`` of module ``name`` under the first import root holding it
        (a regular or namespace package's ``.py`` file, or a stub); ``project_only``: never under an
        installation directory."""
        parts = name.split(".")
        if not all(p.isidentifier() for p in parts):
            return None
        if self._roots is None:
            self._roots = list(dict.fromkeys(os.path.abspath(r) for r in self._import_roots()))
        for root in self._roots:
            if project_only and os.path.basename(root) in _INSTALLATION_DIRECTORIES:
                continue
            found = self._may_hold(root, parts[0]) and _module_file(root, parts, (".py", ".pyi"))
            if found:
                return found
        return None

    def _may_hold(self, root: str, head: str) -> bool:
        """Whether ``root`` has an entry ``head``, ``head.py`` or ``head.pyi`` (case-insensitively,
        one listing per root and run); an unlistable root may hold anything."""
        if not head.isascii():
            return True
        if root not in self._listings:
            try:
                self._listings[root] = frozenset(n.casefold() for n in os.listdir(root))
            except OSError:
                self._listings[root] = None
        names = self._listings[root]
        if names is None:
            return True
        head = head.casefold()
        return head in names or f"{head}.py" in names or f"{head}.pyi" in names

    # -- finding files -----------------------------------------------------------------------

    def _find_spec(self, name: str) -> ModuleSpec | None:
        """The module's spec on the search path (memoised as ``_spec``)."""
        parent = name.rpartition(".")[0]
        try:
            if not parent:
                return PathFinder.find_spec(name, self.search)
            outer = self._spec(parent)
            locations = None if outer is None else outer.submodule_search_locations
            return PathFinder.find_spec(name, list(locations)) if locations else None
        except (ImportError, OSError, ValueError):
            return None

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
            roots.extend(self._typeshed_stdlib)
        return next((f for r in roots if (f := _module_file(r, [top, *parts], (".pyi",)))), None)

    @functools.cached_property
    def _typeshed_stdlib(self) -> list[str]:
        """The standard-library stubs of an installed typeshed copy (mypy's), if any."""
        spec = self._spec("mypy")
        found = [
            os.path.join(p, "typeshed", "stdlib")
            for p in (spec and spec.submodule_search_locations) or []
        ]
        return [p for p in found if os.path.isdir(p)][:1]


def _module_file(
    root: str, parts: Sequence[str], suffixes: Sequence[str]
) -> tuple[str, bool] | None:
    """``(path, is package)`` of the module spelled ``parts`` under ``root``: a package's
    ``__init__`` or a module file, per suffix in order."""
    base = os.path.join(root, *parts)
    for suffix in suffixes:
        for path, is_package in (
            (os.path.join(base, f"__init__{suffix}"), True),
            (base + suffix, False),
        ):
            if os.path.isfile(path):
                return path, is_package
    return None
