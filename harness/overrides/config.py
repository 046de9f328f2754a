"""Project configuration: the ``[tool.harness.overrides]`` table of ``pyproject.toml``.

Found like ruff's settings (the nearest ``pyproject.toml`` holding the table above the scanned
paths); ``--config FILE`` names it, ``--isolated`` ignores it, command-line options win. The keys
are listed in ``docs/checker.md``.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError

if TYPE_CHECKING:
    from argparse import Namespace

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

FILENAME = "pyproject.toml"
TABLE = ("tool", "harness", "overrides")
DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".*",
    "__pycache__",
    "node_modules",
    "site-packages",
    "build",
    "dist",
    "venv",
    "env",
)
"""Names never walked into by default: hidden entries, caches, virtual environments, builds."""

FAIL_ON = ("error", "warning")
_KEYS = frozenset(
    {"exclude", "extend-exclude", "select", "ignore", "fail-on", "baseline", "python"}
)


@dataclass(frozen=True)
class Config:
    """Settings of one project; defaults when no file was found."""

    path: str | None = None
    """The ``pyproject.toml`` the settings came from (``None``: built-in defaults)."""
    root: str = "."
    """Directory that path patterns and ``baseline`` are relative to."""
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    select: frozenset[str] = frozenset()
    """Rule codes or symbols, as written (the CLI resolves and validates them)."""
    ignore: frozenset[str] = frozenset()
    fail_on: str | None = None
    baseline: str | None = None
    """Absolute path of the baseline file, if the file names one."""
    python: str | None = None
    """Absolute path of the environment installed packages are read from (an interpreter, a
    virtual environment or a directory of packages), if the file names one."""

    @property
    def excluder(self) -> Excluder:
        """What ``exclude`` and ``extend-exclude`` leave out of a walk."""
        return Excluder((*self.exclude, *self.extend_exclude), self.root)


def working_directory() -> str:
    """:func:`os.getcwd`, or a :class:`HarnessError` when the directory was deleted under us."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise HarnessError(
            "the working directory no longer exists (it was deleted or moved); cd to one that does"
        ) from None


def common_directory(paths: Sequence[str]) -> str:
    """The directory ``paths`` (files or directories) have in common; the first one's when they
    have none (other drives)."""
    dirs = [p if os.path.isdir(p) else os.path.dirname(p) for p in map(os.path.abspath, paths)]
    try:
        return os.path.commonpath(dirs)
    except ValueError:
        return dirs[0]


def find(paths: Sequence[str], cwd: str) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.harness.overrides]`` table, walking up
    from the directory the scanned ``paths`` have in common (``cwd`` when none is given)."""
    start = Path(common_directory([os.path.join(cwd, given) for given in paths or ["."]]))
    for directory in (start, *start.parents):
        candidate = directory / FILENAME
        if candidate.is_file() and _table(_read(candidate), candidate) is not None:
            return candidate
    return None


def load(path: str | Path | None) -> Config:
    """Settings from ``path`` (built-in defaults for ``None``). Raises :class:`HarnessError`
    for unreadable TOML, unknown keys and values of the wrong type."""
    if path is None:
        return Config()
    file = Path(os.path.abspath(path))
    data = _read(file)
    table = _table(data, file)
    if table is None:
        if file.name == FILENAME:
            return Config(path=str(file), root=str(file.parent))
        table = dict(data)  # a dedicated file (``--config overrides.toml``) holds the keys bare
        where = ""
        if table and set(table) <= {"tool"}:  # other tools' tables only: not ours at all
            raise HarnessError(
                f"{file} has no [tool.harness.overrides] table (nor the settings bare, as a "
                "dedicated file holds them)"
            )
    else:
        where = " in [tool.harness.overrides]"
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise HarnessError(
            f"{file}: unknown key(s){where}: {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}"
        )
    root = str(file.parent)
    fail_on = table.get("fail-on")
    if fail_on is not None and fail_on not in FAIL_ON:
        raise HarnessError(f"{file}: fail-on must be one of {', '.join(FAIL_ON)}, not {fail_on!r}")
    baseline = table.get("baseline")
    if baseline is not None and not isinstance(baseline, str):
        raise HarnessError(f"{file}: baseline must be a string (a path)")
    python = table.get("python")
    if python is not None and not isinstance(python, str):
        raise HarnessError(f"{file}: python must be a string (an interpreter or environment)")
    if python is not None and not python.strip():
        raise HarnessError(f"{file}: python is empty: name an interpreter or environment")
    return Config(
        path=str(file),
        root=root,
        exclude=_strings(table, "exclude", file, DEFAULT_EXCLUDE),
        extend_exclude=_strings(table, "extend-exclude", file),
        select=frozenset(_strings(table, "select", file)),
        ignore=frozenset(_strings(table, "ignore", file)),
        fail_on=fail_on,
        baseline=None if baseline is None else os.path.join(root, baseline),
        python=None if python is None else os.path.join(root, os.path.expanduser(python)),
    )


def discover_config(
    paths: Sequence[str], cwd: str, *, explicit: str | None = None, isolated: bool = False
) -> Config:
    """The configuration of a run: ``explicit`` (``--config``), else the nearest file."""
    if isolated:
        return Config()
    if explicit is not None:
        if os.path.isdir(explicit):
            raise HarnessError(f"{explicit} is a directory, not a configuration file")
        if not os.path.isfile(explicit):
            raise HarnessError(f"configuration file not found: {explicit}")
        return load(explicit)
    return load(find(paths, cwd))


def settings(paths: Sequence[str], cwd: str, args: Namespace) -> tuple[Config, Excluder]:
    """A run's configuration (``--config``, ``--isolated``) and what it leaves out: the file's
    exclusions, or ``--exclude``'s instead, and ``--extend-exclude``'s as well."""
    config = discover_config(paths, cwd, explicit=args.config, isolated=args.isolated)
    excluder = config.excluder if args.exclude is None else Excluder(args.exclude, cwd)
    if args.extend_exclude:
        excluder = excluder.extended(args.extend_exclude, cwd)
    return config, excluder


def _read(path: Path) -> Mapping[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise HarnessError(f"cannot read {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise HarnessError(f"{path} is not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise HarnessError(f"{path} is not UTF-8: {exc.reason}") from exc


def _table(data: Mapping[str, Any], path: Path) -> dict[str, Any] | None:
    node: object = data
    for key in TABLE:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(node, dict):
        raise HarnessError(f"{path}: [tool.harness.overrides] must be a table")
    return {str(k): v for k, v in node.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


def _strings(
    table: Mapping[str, Any], key: str, path: Path, default: tuple[str, ...] = ()
) -> tuple[str, ...]:
    value = table.get(key)
    if value is None:
        return default
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):  # pyright: ignore[reportUnknownVariableType]
        raise HarnessError(f"{path}: {key} must be a list of strings")
    return tuple(str(v) for v in value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


# --- globs --------------------------------------------------------------------------------


def glob_match(pattern: str, path: str) -> bool:
    """Whether the ``/``-separated ``path`` matches ``pattern`` (``*``, ``?``, ``[...]`` within one
    component, ``**`` across any number), in O(len(pattern) * len(path))."""
    parts = [p for p in pattern.strip("/").split("/") if p]
    names = path.strip("/").split("/")
    t = n = 0
    star_t, star_n = -1, 0
    while n < len(names):
        if t < len(parts) and parts[t] != "**" and fnmatchcase(names[n], parts[t]):
            t += 1
            n += 1
        elif t < len(parts) and parts[t] == "**":
            star_t, star_n = t, n
            t += 1
        elif star_t != -1:
            star_n += 1
            t, n = star_t + 1, star_n
        else:
            return False
    return all(p == "**" for p in parts[t:])


class Excluder:
    """Decides which files and directories a walk leaves out: groups of patterns, each
    relative to its own root (the configuration file's directory, or the working directory
    for command-line patterns)."""

    def __init__(self, patterns: Iterable[str], root: str) -> None:
        self._groups: list[tuple[str, list[str], list[str]]] = []
        self._literal: set[str] = set()
        self._prefixes: list[str] = []
        self.patterns: tuple[str, ...] = ()
        self._add(patterns, root)

    def _add(self, patterns: Iterable[str], root: str) -> None:
        listed = tuple(patterns)
        self.patterns = (*self.patterns, *listed)
        names: list[str] = []
        for pattern in (p.rstrip("/") for p in listed if "/" not in p.rstrip("/")):
            if not any(c in pattern for c in "*?["):
                self._literal.add(pattern)  # most patterns name a directory: a set lookup
            elif pattern.endswith("*") and not any(c in pattern[:-1] for c in "*?["):
                self._prefixes.append(pattern[:-1])
            else:
                names.append(pattern)
        paths = [p for p in listed if "/" in p.rstrip("/")]
        self._groups.append((os.path.abspath(root), names, paths))

    def extended(self, patterns: Iterable[str], root: str) -> Excluder:
        """A copy that also leaves out ``patterns`` (relative to ``root``)."""
        out = copy.copy(self)
        out._groups, out._literal = [*self._groups], {*self._literal}
        out._prefixes = [*self._prefixes]
        out._add(patterns, root)
        return out

    def excluded(self, path: str) -> bool:
        """True when ``path`` (absolute) is left out by its name or its relative path."""
        name = os.path.basename(path.rstrip(os.sep))
        if name in self._literal or any(name.startswith(p) for p in self._prefixes):
            return True
        for root, names, paths in self._groups:
            if any(fnmatchcase(name, pattern) for pattern in names):
                return True
            if paths and _is_under(path, root):
                relative = os.path.relpath(path, root).replace(os.sep, "/")
                if any(glob_match(p, relative) for p in paths):
                    return True
        return False

    def excluded_below(self, path: str, top: str) -> bool:
        """Whether ``path`` or a directory between ``top`` (exclusive) and it is excluded:
        for a file named on the command line, whose parents no walk has judged."""
        current = os.path.abspath(path)
        top = os.path.abspath(top)
        while current != top and _is_under(current, top):
            if self.excluded(current):
                return True
            current = os.path.dirname(current)
        return False


def _is_under(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip(os.sep) + os.sep)
