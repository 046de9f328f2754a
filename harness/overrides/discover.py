"""Find the Python files under the given paths and name their modules.

A file's primary module name follows its ``__init__.py`` chain (``vllm/v1/attention/...``
-> ``vllm.v1.attention...``). Files outside regular packages (namespace packages, scripts,
``src/`` layouts) also get the dotted name relative to each scanned root, so absolute
imports between them resolve. Walking is iterative, follows directory symlinks once, and
reports loops and unreadable entries (:class:`Unreadable`) instead of failing.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from harness.errors import HarnessError

SKIP_DIRS = frozenset(
    {"__pycache__", "node_modules", "site-packages", "build", "dist", "venv", "env"}
)
"""Directory names never descended into (besides hidden ``.*`` directories)."""


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

    def __init__(self, cwd: str) -> None:
        self.display = _Displayer(cwd)
        self.files: dict[str, SourceFile] = {}
        self.unreadable: list[Unreadable] = []
        self.has_init: dict[str, bool] = {}
        self.packages: dict[str, tuple[str, ...]] = {}
        self.seen_files: set[str] = set()
        self.seen_dirs: set[str] = set()

    def _is_package(self, directory: str) -> bool:
        known = self.has_init.get(directory)
        if known is None:
            known = self.has_init[directory] = os.path.isfile(
                os.path.join(directory, "__init__.py")
            )
        return known

    def package_parts(self, directory: str) -> tuple[str, ...]:
        """Dotted parts of ``directory`` as a package (empty if it is not one)."""
        cached = self.packages.get(directory)
        if cached is not None:
            return cached
        if not self._is_package(directory):
            parts: tuple[str, ...] = ()
        else:
            parent = os.path.dirname(directory)
            head = self.package_parts(parent) if parent != directory else ()
            parts = (*head, os.path.basename(directory))
        self.packages[directory] = parts
        return parts

    def add(self, path: str, root: str, canonical: str) -> None:
        """Record one file (once per real path) with its module names."""
        if canonical in self.seen_files:
            return
        self.seen_files.add(canonical)
        directory, filename = os.path.split(path)
        stem = filename.rpartition(".")[0]
        is_package = stem == "__init__"
        package = self.package_parts(directory)
        parts = package if is_package else (*package, stem)
        primary = ".".join(parts) or stem
        names: list[str] = []  # longest first: the dotted path from the root, then suffixes
        prefix = root.rstrip(os.sep) + os.sep
        if directory.startswith(prefix):
            rel_parts = directory[len(prefix) :].split(os.sep)
            tail = () if is_package else (stem,)
            for i in range(len(rel_parts)):
                name = ".".join((*rel_parts[i:], *tail))
                if all(p.isidentifier() for p in name.split(".")):
                    names.append(name)
        if not package and names:
            # Outside regular packages (namespace packages, scripts): the path from the root
            # is the best name, and the one relative imports must be resolved against.
            names.append(primary)
            primary = names.pop(0)
        aliases = tuple(n for n in dict.fromkeys(names) if n != primary)
        display = self.display(path)
        self.files[display] = SourceFile(path, display, primary, is_package, aliases)

    def walk(self, root: str) -> None:
        """Collect the ``.py`` files under ``root`` (iterative; each real directory once)."""
        stack = [(root, os.path.realpath(root))]
        while stack:
            directory, canonical = stack.pop()
            if canonical in self.seen_dirs:
                continue
            self.seen_dirs.add(canonical)
            try:
                with os.scandir(directory) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as exc:
                reason = f"cannot list directory: {exc.strerror}"
                self.unreadable.append(Unreadable(self.display(directory), reason))
                continue
            self.has_init[directory] = any(e.name == "__init__.py" for e in entries)
            subdirs: list[tuple[str, str]] = []
            for entry in entries:
                self._entry(entry, root, canonical, subdirs)
            stack.extend(reversed(subdirs))

    def _entry(
        self, entry: os.DirEntry[str], root: str, parent: str, subdirs: list[tuple[str, str]]
    ) -> None:
        name = entry.name
        try:
            link = entry.is_symlink()
            is_dir = entry.is_dir()
            is_file = not is_dir and entry.is_file()
        except OSError as exc:
            reason = "symlink loop" if exc.errno == errno.ELOOP else f"cannot stat: {exc.strerror}"
            self.unreadable.append(Unreadable(self.display(entry.path), reason))
            return
        canonical = os.path.realpath(entry.path) if link else os.path.join(parent, name)
        if is_dir:
            if name.startswith(".") or name in SKIP_DIRS:
                return
            if link and (parent == canonical or parent.startswith(canonical + os.sep)):
                self.unreadable.append(Unreadable(self.display(entry.path), "symlink loop"))
                return
            subdirs.append((entry.path, canonical))
        elif is_file:
            if _is_source(name):
                self.add(entry.path, root, canonical)
        elif link:
            reason = _symlink_reason(entry.path)
            if reason == "symlink loop" or _is_source(name):
                self.unreadable.append(Unreadable(self.display(entry.path), reason))


def _is_source(name: str) -> bool:
    return name.endswith(".py")


def discover(
    paths: Iterable[str], cwd: str | None = None
) -> tuple[list[SourceFile], list[Unreadable]]:
    """All ``.py`` files under ``paths`` (files or directories), each once, in sorted order.

    Raises :class:`HarnessError` for a path given explicitly that does not exist.
    """
    walker = _Walker(os.path.abspath(cwd or os.getcwd()))
    for given in paths:
        absolute = os.path.abspath(given)
        if not os.path.lexists(absolute):
            raise HarnessError(f"path does not exist: {given}")
        if os.path.isfile(absolute):
            if absolute.endswith((".py", ".pyi")):  # pre-commit may pass any staged file
                walker.add(absolute, os.path.dirname(absolute), os.path.realpath(absolute))
        elif os.path.isdir(absolute):
            walker.walk(absolute)
        else:
            walker.unreadable.append(
                Unreadable(walker.display(absolute), _symlink_reason(absolute))
            )
    ordered = sorted(walker.files.values(), key=lambda f: f.display)
    return ordered, walker.unreadable


def _symlink_reason(path: str) -> str:
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop"
        return f"dangling symlink: {exc.strerror}"
    return "not a regular file or directory"
