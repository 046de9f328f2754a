"""Find the Python files under the given paths and name their modules.

A file's primary module name follows its ``__init__.py`` chain (``vllm/v1/attention/...``
-> ``vllm.v1.attention...``). Files outside regular packages (namespace packages, scripts,
``src/`` layouts) also get the dotted name relative to each scanned root, so absolute
imports between them resolve. Walking is iterative, follows directory symlinks once, and
reports loops and unreadable entries as HO404 instead of failing.
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
    """A path in the tree that could not be read (reported as HO404)."""

    display: str
    reason: str


def display_path(path: str | Path, cwd: str | None = None) -> str:
    """``path`` relative to ``cwd`` (default: the working directory) if under it, POSIX style."""
    absolute = os.path.abspath(path)
    base = cwd or os.getcwd()
    try:
        rel = os.path.relpath(absolute, base)
    except ValueError:
        return Path(absolute).as_posix()
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return Path(absolute).as_posix()
    return Path(rel).as_posix()


def _package_parts(directory: str, cache: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """Dotted parts of ``directory`` as a package (empty if it is not one)."""
    chain: list[str] = []
    current = directory
    while True:
        cached = cache.get(current)
        if cached is not None:
            parts = cached + tuple(reversed(chain))
            break
        if not os.path.isfile(os.path.join(current, "__init__.py")):
            parts = tuple(reversed(chain))
            break
        chain.append(os.path.basename(current))
        parent = os.path.dirname(current)
        if parent == current:
            parts = tuple(reversed(chain))
            break
        current = parent
    cache[directory] = parts
    return parts


def _names(path: str, root: str, cache: dict[str, tuple[str, ...]]) -> tuple[str, tuple[str, ...]]:
    directory, filename = os.path.split(path)
    stem = filename[: -len(".py")]
    package = _package_parts(directory, cache)
    is_package = stem == "__init__"
    parts = package if is_package else (*package, stem)
    primary = ".".join(parts) or stem
    aliases: list[str] = []
    rel = os.path.relpath(directory, root)
    if rel != os.curdir and not rel.startswith(os.pardir):
        rel_parts = Path(rel).parts
        tail = () if is_package else (stem,)
        for i in range(len(rel_parts)):
            name = ".".join((*rel_parts[i:], *tail))
            if name and name != primary and all(p.isidentifier() for p in name.split(".")):
                aliases.append(name)
    return primary, tuple(aliases)


def _is_source(name: str) -> bool:
    return name.endswith(".py")


def discover(
    paths: Iterable[str], cwd: str | None = None
) -> tuple[list[SourceFile], list[Unreadable]]:
    """All ``.py`` files under ``paths`` (files or directories), each once, in sorted order.

    Raises :class:`HarnessError` for a path given explicitly that does not exist.
    """
    files: dict[str, SourceFile] = {}
    unreadable: list[Unreadable] = []
    cache: dict[str, tuple[str, ...]] = {}
    seen_real: set[str] = set()
    seen_dirs: set[str] = set()
    for given in paths:
        absolute = os.path.abspath(given)
        if not os.path.lexists(absolute):
            raise HarnessError(f"path does not exist: {given}")
        if os.path.isfile(absolute):
            root = os.path.dirname(absolute)
            _add(absolute, root, cwd, cache, files, seen_real)
            continue
        if not os.path.isdir(absolute):
            unreadable.append(Unreadable(display_path(absolute, cwd), _why(absolute)))
            continue
        _walk(absolute, cwd, cache, files, seen_real, seen_dirs, unreadable)
    ordered = sorted(files.values(), key=lambda f: f.display)
    return ordered, unreadable


def _why(path: str) -> str:
    try:
        os.stat(path)
    except OSError as exc:
        return f"cannot read {exc.strerror.lower() if exc.strerror else exc}"
    return "not a regular file or directory"


def _add(
    path: str,
    root: str,
    cwd: str | None,
    cache: dict[str, tuple[str, ...]],
    files: dict[str, SourceFile],
    seen_real: set[str],
) -> None:
    real = os.path.realpath(path)
    if real in seen_real:
        return
    seen_real.add(real)
    module, aliases = _names(path, root, cache)
    display = display_path(path, cwd)
    is_package = os.path.basename(path) == "__init__.py"
    files[display] = SourceFile(path, display, module, is_package, aliases)


def _walk(
    root: str,
    cwd: str | None,
    cache: dict[str, tuple[str, ...]],
    files: dict[str, SourceFile],
    seen_real: set[str],
    seen_dirs: set[str],
    unreadable: list[Unreadable],
) -> None:
    stack = [root]
    while stack:
        directory = stack.pop()
        real = os.path.realpath(directory)
        if real in seen_dirs:
            parent = os.path.realpath(os.path.dirname(directory))
            if os.path.islink(directory) and (parent == real or parent.startswith(real + os.sep)):
                unreadable.append(Unreadable(display_path(directory, cwd), "symlink loop"))
            continue
        seen_dirs.add(real)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            unreadable.append(
                Unreadable(display_path(directory, cwd), f"cannot list directory: {exc.strerror}")
            )
            continue
        subdirs: list[str] = []
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir()
                is_file = entry.is_file()
            except OSError as exc:
                unreadable.append(
                    Unreadable(display_path(entry.path, cwd), f"cannot stat: {exc.strerror}")
                )
                continue
            if is_dir:
                if not name.startswith(".") and name not in SKIP_DIRS:
                    subdirs.append(entry.path)
            elif is_file:
                if _is_source(name):
                    _add(entry.path, root, cwd, cache, files, seen_real)
            elif entry.is_symlink():
                reason = _symlink_reason(entry.path)
                if reason == "symlink loop" or _is_source(name):
                    unreadable.append(Unreadable(display_path(entry.path, cwd), reason))
        stack.extend(reversed(subdirs))


def _symlink_reason(path: str) -> str:
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop"
        return f"dangling symlink: {exc.strerror}"
    return "not a regular file or directory"
