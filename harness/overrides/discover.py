"""Find the Python files under the given paths and name their modules.

A file in a regular package is named by its ``__init__.py`` chain; one outside (namespace packages,
scripts, ``src/`` layouts) by its path from an import root that does not depend on where the scan
starts (:meth:`_Walker.package_root`, :func:`project_root`). Names from other roots are aliases. A
file is known by its real path, once; ``docs/checker.md`` ("Module names") has the details.
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from harness.errors import HarnessError
from harness.overrides.config import DEFAULT_EXCLUDE, Excluder, common_directory


class SourceFile(NamedTuple):
    """One Python file of the tree."""

    path: str
    """Absolute path, symlinks not resolved."""
    display: str
    """Path as reported: relative to the working directory when under it, POSIX style."""
    module: str
    """Primary dotted module name."""
    is_package: bool
    """True for ``__init__.py``."""
    aliases: tuple[str, ...]
    """Further dotted names the module may be imported as (namespace packages, roots)."""
    real: str = ""
    """The real path (symlinks resolved): the file's identity."""


class Unreadable(NamedTuple):
    """A path in the tree that could not be read, and why."""

    display: str
    reason: str


def display_path(path: str | Path, cwd: str | None = None) -> str:
    """``path`` relative to ``cwd`` (default: the working directory) if under it, POSIX style."""
    absolute = os.path.abspath(path)
    base = os.path.abspath(cwd or os.getcwd())
    return _Displayer(base)(absolute)


class _Displayer:
    """Fast ``display_path`` for many files under one working directory."""

    def __init__(self, cwd: str) -> None:
        self.prefix = cwd.rstrip(os.sep) + os.sep

    def __call__(self, absolute: str) -> str:
        if absolute.startswith(self.prefix):
            absolute = absolute[len(self.prefix) :]
        elif absolute + os.sep == self.prefix:
            absolute = "."
        return absolute.replace(os.sep, "/") if os.sep != "/" else absolute


class _Walker:
    """Collects files; knows which directories hold an ``__init__.py``."""

    def __init__(self, cwd: str, anchors: Sequence[str] = (), project: str | None = None) -> None:
        self.display = _Displayer(cwd)
        self.anchors = tuple(anchors)
        """Import roots every file is also named from, preferred first (see
        :func:`import_roots`); the scanned root a file was found under comes last."""
        self.project = project
        """The project root (:func:`project_root`): where :meth:`package_root` looks from."""
        self.by_real: dict[str, tuple[bool, SourceFile]] = {}
        """Real path -> (reached through a symlink, the file as found)."""
        self.unreadable: list[Unreadable] = []
        self.has_init: dict[str, bool] = {}
        self.seen_dirs: set[str] = set()
        self.linked: list[tuple[str, str, str]] = []
        """Symlinked directories ``(path, real path, root)``, walked after every real one."""
        self.excluder = Excluder(DEFAULT_EXCLUDE, cwd)
        """What walks leave out."""
        self.package_parts = functools.cache(self._package_parts)
        self.outermost_package = functools.cache(self._outermost_package)
        self._holds_package = functools.cache(self._lists_package)
        self._directory_names = functools.cache(self._names_from_roots)

    def _is_package(self, directory: str) -> bool:
        known = self.has_init.get(directory)
        if known is None:
            known = self.has_init[directory] = os.path.isfile(
                os.path.join(directory, "__init__.py")
            )
        return known

    def _package_parts(self, directory: str) -> tuple[str, ...]:
        """Dotted parts of ``directory`` as a package (memoised as ``package_parts``): its path
        from the folder holding the outermost regular package around it (namespace portions of
        that package included), else its ``__init__.py`` chain (empty if it is not one)."""
        top = self.outermost_package(directory)
        rel = None if top is None else _below(directory, os.path.dirname(top))
        if rel and all(part.isidentifier() for part in rel):
            parts: tuple[str, ...] = tuple(rel)  # inside a regular package, as Python names it
        elif not self._is_package(directory):
            parts = ()
        else:
            parent = os.path.dirname(directory)
            head = self.package_parts(parent) if parent != directory else ()
            parts = (*head, os.path.basename(directory))
        return parts

    def names(self, path: str, root: str) -> tuple[str, bool, tuple[str, ...]]:
        """Primary module name, whether it is a package, further names (``path`` need not
        exist: a deleted file still has the names it was imported by)."""
        directory, filename = os.path.split(path)
        stem = filename.rpartition(".")[0] or filename
        is_package = stem == "__init__"
        package = self.package_parts(directory)
        primary = ".".join(package if is_package else (*package, stem)) or stem
        named = is_package or stem.isidentifier()
        names: list[str] = []  # per import root, longest first: the path from it, then suffixes
        preferred: str | None = None
        for prefixes in self._directory_names(directory, root):
            found = (
                [] if not named else prefixes if is_package else [f"{d}.{stem}" for d in prefixes]
            )
            if preferred is None:  # the first import root holding the file names it
                preferred = found[0] if found else primary
            names.extend(found)
        if not package and preferred is not None and preferred != primary:
            # Outside regular packages (namespace packages, scripts): the path from the
            # preferred import root is the best name, and the one relative imports must be
            # resolved against.
            names.append(primary)
            primary = preferred
        return primary, is_package, tuple(n for n in dict.fromkeys(names) if n != primary)

    def _lists_package(self, directory: str) -> bool:
        """Whether ``directory`` holds a regular package (memoised as ``_holds_package``)."""
        try:
            entries = os.listdir(directory)
        except OSError:
            entries = []
        return any(
            name.isidentifier() and self._is_package(os.path.join(directory, name))
            for name in entries
        )

    def package_root(self, directory: str) -> str | None:
        """The import root of the project's regular packages nearest ``directory``: the folder
        holding the outermost regular package around it, else the first folder up to the project
        root that is no package and holds one."""
        top = self.outermost_package(directory)
        if top is not None:
            return os.path.dirname(top)
        current = directory
        while True:
            if self._holds_package(current):
                return current
            parent = os.path.dirname(current)
            if current == self.project or parent == current:
                return None
            current = parent

    def _outermost_package(self, directory: str) -> str | None:
        """The outermost regular package holding ``directory`` (or being it), from
        ``directory`` up to the project root (without one, up to the filesystem root),
        through folders without ``__init__.py`` (namespace portions); ``None`` if none
        (memoised as ``outermost_package``)."""
        parent = os.path.dirname(directory)
        above = None
        if directory != self.project and parent != directory:
            above = self.outermost_package(parent)
        return above if above is not None else directory if self._is_package(directory) else None

    def _names_from_roots(self, directory: str, root: str) -> list[list[str]]:
        """Per import root holding ``directory`` (preferred first), the dotted names of the
        directory from it, longest first (memoised as ``_directory_names``)."""
        known = list[list[str]]()
        first = self.package_root(directory)
        for anchor in dict.fromkeys((*((first,) if first else ()), *self.anchors, root)):
            rel = _below(directory, anchor)
            if rel is not None:
                valid = [p.isidentifier() for p in rel]
                known.append([".".join(rel[i:]) for i in range(len(rel)) if all(valid[i:])])
        return known

    def add(self, path: str, root: str, real: str, linked: bool) -> None:
        """Record one file, once per real path: the first direct path found, else the first
        path through a symlink. The names of the other paths become aliases, so imports
        through any of them reach the one module."""
        primary, is_package, aliases = self.names(path, root)
        file = SourceFile(path, self.display(path), primary, is_package, aliases, real)
        known = self.by_real.get(real)
        if known is not None:
            keep, other = (known[1], file) if linked or not known[0] else (file, known[1])
            names = (*keep.aliases, other.module, *other.aliases)
            merged = tuple(n for n in dict.fromkeys(names) if n != keep.module)
            file, linked = keep._replace(aliases=merged), known[0] and linked
        self.by_real[real] = (linked, file)

    def _scan(self, directory: str) -> list[os.DirEntry[str]]:
        """The entries of ``directory`` by name (``OSError`` when it cannot be listed)."""
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
        self.has_init[directory] = any(e.name == "__init__.py" for e in entries)
        return entries

    def walk(self, start: str, real: str, root: str, linked: bool = False) -> None:
        """Collect the ``.py`` files under ``start``, each real directory once, queueing symlinked
        directories for :func:`discover` to walk last; names are relative to ``root``."""
        stack = [(start, real)]
        while stack:
            directory, canonical = stack.pop()
            if canonical in self.seen_dirs:
                if linked:  # reached directly too: its files exist once, named both ways
                    self.walk_aliases(directory, canonical, root)
                continue
            self.seen_dirs.add(canonical)
            try:
                entries = self._scan(directory)
            except OSError as exc:
                reason = f"cannot list directory: {exc.strerror}"
                self.unreadable.append(Unreadable(self.display(directory), reason))
                continue
            subdirs: list[tuple[str, str]] = []
            for entry in entries:
                self._entry(entry, root, canonical, subdirs, linked)
            stack.extend(reversed(subdirs))

    def walk_aliases(self, start: str, real: str, root: str) -> None:
        """Add the names the files under ``start`` have through this symlinked path (``aaa -> pkg``:
        ``aaa.base``) to the files found under ``real``; symlinked directories inside are queued,
        not followed."""
        stack = [(start, real)]
        seen: set[str] = set()
        while stack:
            directory, canonical = stack.pop()
            if canonical in seen:
                continue
            seen.add(canonical)
            try:
                entries = self._scan(directory)
            except OSError:
                continue
            for entry in entries:
                try:
                    link, is_dir, is_file = _kinds(entry)
                except OSError:
                    continue
                if self.excluder.excluded(entry.path) or (is_dir and link):
                    continue
                target = os.path.join(canonical, entry.name)
                if is_dir:
                    stack.append((entry.path, target))
                elif is_file and entry.name.endswith(".py"):
                    self.add(entry.path, root, os.path.realpath(target) if link else target, True)

    def _entry(
        self,
        entry: os.DirEntry[str],
        root: str,
        parent: str,
        subdirs: list[tuple[str, str]],
        linked: bool,
    ) -> None:
        name = entry.name
        try:
            link, is_dir, is_file = _kinds(entry)
        except OSError as exc:
            reason = "symlink loop" if exc.errno == errno.ELOOP else f"cannot stat: {exc.strerror}"
            self.unreadable.append(Unreadable(self.display(entry.path), reason))
            return
        canonical = os.path.realpath(entry.path) if link else os.path.join(parent, name)
        if is_dir:
            if self.excluder.excluded(entry.path):
                return
            if link and (parent == canonical or parent.startswith(canonical + os.sep)):
                self.unreadable.append(Unreadable(self.display(entry.path), "symlink loop"))
                return
            if link:
                self.linked.append((entry.path, canonical, root))
            else:
                subdirs.append((entry.path, canonical))
        elif is_file:
            if name.endswith(".py") and not self.excluder.excluded(entry.path):
                self.add(entry.path, root, canonical, linked or link)
        elif link:
            reason = _symlink_reason(entry.path)
            if reason == "symlink loop" or name.endswith(".py"):
                self.unreadable.append(Unreadable(self.display(entry.path), reason))


def _kinds(entry: os.DirEntry[str]) -> tuple[bool, bool, bool]:
    """Whether ``entry`` is a symlink, a directory, a file (``OSError`` when it cannot be told)."""
    link, is_dir = entry.is_symlink(), entry.is_dir()
    return link, is_dir, not is_dir and entry.is_file()


def discover(
    paths: Iterable[str], cwd: str | None = None, excluder: Excluder | None = None
) -> tuple[list[SourceFile], list[Unreadable]]:
    """All ``.py`` files under ``paths``, each once, sorted; a walk leaves out what ``excluder``
    excludes, a file named in ``paths`` is always taken. :class:`HarnessError` for a missing path."""
    base = os.path.abspath(cwd or os.getcwd())
    paths = list(paths)
    walker = _Walker(base, import_roots(paths, base), _marked_root(paths or [base]))
    walker.excluder = excluder or Excluder(DEFAULT_EXCLUDE, base)
    for given in paths:
        absolute = os.path.abspath(given)
        if not os.path.lexists(absolute):
            raise HarnessError(f"path does not exist: {given}")
        real = os.path.realpath(absolute)
        if os.path.isfile(absolute):
            if absolute.endswith((".py", ".pyi")):  # pre-commit may pass any staged file
                walker.add(absolute, os.path.dirname(absolute), real, real != absolute)
        elif os.path.isdir(absolute):
            walker.walk(absolute, real, absolute, linked=real != absolute)
        else:
            walker.unreadable.append(
                Unreadable(walker.display(absolute), _symlink_reason(absolute))
            )
    while walker.linked:  # symlinked directories, after every real one
        path, real, root = walker.linked.pop(0)
        walker.walk(path, real, root, linked=True)
    ordered = sorted((file for _, file in walker.by_real.values()), key=lambda f: f.display)
    return ordered, walker.unreadable


def module_names(path: str, roots: Sequence[str], cwd: str | None = None) -> tuple[str, ...]:
    """The dotted names a file (or a package directory) at ``path`` would be imported by,
    whether or not it exists: how a deleted file is still recognised. Named as
    :func:`discover` names the files of a walk of ``roots`` from ``cwd``."""
    absolute = os.path.abspath(path)
    if not absolute.endswith((".py", ".pyi")):
        absolute = os.path.join(absolute, "__init__.py")
    base = os.path.abspath(cwd or os.getcwd())
    project = _marked_root(list(roots) or [base])
    walker = _Walker(os.path.dirname(absolute), import_roots(roots, base), project)
    primary, _, aliases = walker.names(absolute, scanned_root(absolute, roots))
    return (primary, *aliases)


def scanned_root(path: str, roots: Sequence[str]) -> str:
    """The longest of ``roots`` holding ``path``, else ``path``'s own directory (absolute)."""
    absolute = os.path.abspath(path)
    holding = [
        a for a in map(os.path.abspath, roots) if absolute.startswith(a.rstrip(os.sep) + os.sep)
    ]
    return max(holding, key=len, default=os.path.dirname(absolute))


def absolute_module(module: str, is_package: bool, name: str, level: int) -> str:
    """Absolute name of ``from {'.' * level}{name} import ...`` in module ``module``."""
    if level == 0:
        return name
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: max(len(parts) - level + 1, 0)]
    return ".".join([*parts, name] if name else parts)


def import_roots(paths: Sequence[str], cwd: str) -> tuple[str, ...]:
    """Directories files are named from, preferred first: the project root of ``paths``, then
    ``cwd`` (``cwd`` first without a :data:`ROOT_MARKERS` entry above the paths)."""
    marked = _marked_root(list(paths) or [cwd])
    if marked is None:  # no project root: as ``python -m`` from the working directory
        return tuple(dict.fromkeys((cwd, common_directory(list(paths) or [cwd]))))
    return tuple(dict.fromkeys((marked, cwd)))


def _below(directory: str, anchor: str) -> list[str] | None:
    """The parts of ``directory`` below ``anchor`` (``[]`` for ``anchor`` itself), or
    ``None`` when it is not under it."""
    if directory == anchor:
        return []
    prefix = anchor.rstrip(os.sep) + os.sep
    if not directory.startswith(prefix):
        return None
    return directory[len(prefix) :].split(os.sep)


ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git", ".hg")
"""Files or directories that mark a project root."""


def _marked_root(paths: Sequence[str]) -> str | None:
    """The nearest directory at or above the paths' common directory holding a
    :data:`ROOT_MARKERS` entry, or ``None``."""
    start = Path(common_directory(paths))
    up = (start, *start.parents)
    return next((str(d) for d in up if any(os.path.exists(d / m) for m in ROOT_MARKERS)), None)


def project_root(paths: Sequence[str]) -> str:
    """The nearest directory at or above the scanned paths' common directory that holds a
    :data:`ROOT_MARKERS` entry; the common directory itself when none does."""
    return _marked_root(paths) or common_directory(paths)


def _symlink_reason(path: str) -> str:
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop"
        return f"dangling symlink: {exc.strerror}"
    return "not a regular file or directory"
