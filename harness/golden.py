"""Golden files: versioned, sorted, diff-friendly JSON snapshots, each owned by one test.

A golden file is ``<root>/<name>.json``::

    {
      "data": ...,
      "header": {"format": 2, "generator": "harness 0.1.0", "test": "<owning test's node id>",
                 ...the project's own fields (ini ``golden_header``)}
    }

Keys are sorted and floats rounded so that a change shows as a small diff. The header names the
owning test, so a partial run can tell which goldens its tests should have checked. Goldens are
written only with ``update=True``; a mismatch writes ``<name>.obtained.json`` beside the golden and
prints the diff and the regenerating command. The pytest side is :mod:`harness.golden_plugin`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import cast

from harness import __version__

FORMAT_VERSION = 2
"""2: the header names the owning test (``test``); 1 had no owner."""
FLOAT_DIGITS = 6
OBTAINED_SUFFIX = ".obtained.json"
_NAME = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")
RESERVED_HEADER = ("format", "generator", "test")
"""Header fields the store writes itself; a project's own fields take other names."""
_MAX_DIFF_LINES = 80


class GoldenOutcome(Enum):
    """What a golden check did."""

    MATCHED = "matched"
    CREATED = "created"
    UPDATED = "updated"


class GoldenMismatch(AssertionError):
    """The obtained data differs from the golden file, the file is missing or another test owns it."""


def _normalise(value: object) -> object:
    if isinstance(value, float):
        return round(value, FLOAT_DIGITS)
    if isinstance(value, dict):
        items = cast("dict[object, object]", value).items()
        return {str(k): _normalise(v) for k, v in items}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in cast("list[object]", value)]
    return value


def render(data: object, *, test: str, header: Mapping[str, str] | None = None) -> str:
    """The golden file text for ``data`` (JSON-serialisable), owned by the test ``test``, with
    the project's own ``header`` fields (none of :data:`RESERVED_HEADER`)."""
    clash = sorted(set(header or {}) & set(RESERVED_HEADER))
    if clash:
        raise ValueError(f"golden header field(s) {', '.join(clash)} are the store's own")
    fields: dict[str, object] = {
        **(header or {}),
        "format": FORMAT_VERSION,
        "generator": f"harness {__version__}",
        "test": test,
    }
    document = {"header": fields, "data": _normalise(data)}
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


@dataclass(frozen=True, slots=True)
class GoldenDocument:
    """A golden file's parsed content: its data, owner and format."""

    data: object
    test: str | None
    """Node id of the owning test; ``None`` for a format 1 file (no owner recorded)."""
    format: int | None
    fields: dict[str, object] = field(default_factory=dict[str, object])
    """The header fields a project chose (everything but the store's own)."""


def parse(text: str) -> GoldenDocument:
    """Parse golden file text; a file that is not a golden document has no owner and no format."""
    try:
        document: object = json.loads(text)
    except json.JSONDecodeError:
        return GoldenDocument(data=None, test=None, format=None)
    if not isinstance(document, dict):
        return GoldenDocument(data=document, test=None, format=None)
    fields = cast("dict[str, object]", document)
    header = fields.get("header")
    header = cast("dict[str, object]", header) if isinstance(header, dict) else {}
    test, version = header.get("test"), header.get("format")
    return GoldenDocument(
        data=fields.get("data"),
        test=test if isinstance(test, str) else None,
        format=version if isinstance(version, int) else None,
        fields={k: v for k, v in header.items() if k not in RESERVED_HEADER},
    )


@dataclass(frozen=True, slots=True)
class Scan:
    """What is under a store's root: each golden file's owner, and the entries left out."""

    owners: dict[str, str | None]
    """Golden name -> the node id of its owning test (``None``: none recorded)."""
    ignored: list[tuple[str, str]]
    """``(path relative to the root, why)``: a directory named ``*.json``, a name the store
    cannot address, a file that cannot be read as UTF-8 text."""


@dataclass
class GoldenStore:
    """Golden files under ``root``, written only when ``update`` is set."""

    root: Path
    update: bool = False
    regenerate_hint: str = "pytest --update-golden"
    header: Mapping[str, str] = field(default_factory=dict[str, str])

    def path(self, name: str) -> Path:
        """The golden file of snapshot ``name`` (e.g. ``"reference/hybrid-two-groups"``)."""
        if not _NAME.match(name) or any(part in (".", "..") for part in name.split("/")):
            raise ValueError(f"bad golden name {name!r}: use letters, digits, '_', '-', '.', '/'")
        return self.root / f"{name}.json"

    def obtained_path(self, name: str) -> Path:
        """Where a mismatch of golden ``name`` writes what the test obtained."""
        return self.path(name).with_suffix(OBTAINED_SUFFIX)

    def scan(self) -> Scan:
        """Every golden file on disk (``*.obtained.json`` excluded) with its owner, sorted;
        entries that are not usable golden files are listed apart, never raised."""
        owners: dict[str, str | None] = {}
        ignored: list[tuple[str, str]] = []
        if not self.root.is_dir():
            return Scan(owners, ignored)
        for path in sorted(self.root.rglob("*.json")):
            if path.name.endswith(OBTAINED_SUFFIX):
                continue
            relative = path.relative_to(self.root).as_posix()
            name = relative.removesuffix(".json")
            if path.is_symlink() and not path.exists():
                ignored.append((relative, "a symbolic link to nothing"))
            elif not path.is_file():
                ignored.append((relative, "a directory or special file, not a golden file"))
            elif not _NAME.match(name):
                ignored.append((relative, "a name with characters other than A-Z a-z 0-9 _ - ."))
            else:
                try:
                    owners[name] = parse(path.read_text(encoding="utf-8")).test
                except UnicodeDecodeError:
                    ignored.append((relative, "not UTF-8 text"))
                except OSError as exc:
                    ignored.append((relative, f"unreadable: {exc.strerror or exc}"))
        return Scan(owners, ignored)

    def delete(self, name: str) -> None:
        """Remove golden ``name`` and the obtained file a mismatch left beside it."""
        self.path(name).unlink(missing_ok=True)
        self.obtained_path(name).unlink(missing_ok=True)

    def _read(self, path: Path) -> str | None:
        """The golden file's text (``None``: there is none); a file that cannot be read as
        UTF-8 text fails the check that wanted it, saying so."""
        __tracebackhide__ = True
        if not path.exists():
            return None
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            problem = f"is not UTF-8 text ({exc.reason} at byte {exc.start})"
        except OSError as exc:
            problem = f"cannot be read: {exc.strerror or exc}"
        raise GoldenMismatch(
            f"golden file {path} {problem}; write it again, on purpose, with: "
            f"{self.regenerate_hint}"
        )

    def check(self, name: str, data: object, *, test: str) -> GoldenOutcome:
        """Compare ``data`` with golden ``name`` owned by ``test``; write it instead when updating."""
        __tracebackhide__ = True  # pytest: the failure points at the test's check
        path = self.path(name)
        obtained = render(data, test=test, header=self.header)
        obtained_path = self.obtained_path(name)
        if path.exists() and not path.is_file():
            raise GoldenMismatch(f"golden file {path} is a directory, not a file; remove it")
        expected = self._read(path)
        document = parse(obtained)
        # An update also brings the project's own header fields up to date; a plain run judges
        # the data and the owner only.
        if (
            expected is not None
            and _same(recorded := parse(expected), document)
            and (not self.update or recorded.fields == document.fields)
        ):
            obtained_path.unlink(missing_ok=True)
            return GoldenOutcome.MATCHED
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.update:
            path.write_text(obtained, encoding="utf-8")
            obtained_path.unlink(missing_ok=True)
            return GoldenOutcome.CREATED if expected is None else GoldenOutcome.UPDATED
        obtained_path.write_text(obtained, encoding="utf-8")
        if expected is None:
            raise GoldenMismatch(
                f"golden file {path} does not exist; obtained data written to {obtained_path}.\n"
                f"Create it on purpose with: {self.regenerate_hint}"
            )
        recorded = parse(expected)
        if recorded.data == document.data:
            raise GoldenMismatch(
                f"golden file {path}: the data match but {_owner_problem(recorded, test)}; "
                f"record this test as its owner, on purpose, with: {self.regenerate_hint}"
            )
        raise GoldenMismatch(
            f"golden mismatch for {name!r}:\n{_diff(expected, obtained, path, obtained_path)}"
            f"Obtained data written to {obtained_path}.\n"
            f"If the change is intended, regenerate with: {self.regenerate_hint}"
        )


def _owner_problem(recorded: GoldenDocument, test: str) -> str:
    if recorded.test is None:
        return f"the file records no owning test (format {recorded.format or 1})"
    return f"it belongs to {recorded.test} (one golden file, one test), not to {test}"


def _same(recorded: GoldenDocument, obtained: GoldenDocument) -> bool:
    return (
        recorded.format == obtained.format
        and recorded.test == obtained.test
        and recorded.data == obtained.data
    )


def _diff(expected: str, obtained: str, path: Path, obtained_path: Path) -> str:
    lines = list(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            obtained.splitlines(keepends=True),
            fromfile=str(path),
            tofile=str(obtained_path),
            n=2,
        )
    )
    if len(lines) > _MAX_DIFF_LINES:
        more = len(lines) - _MAX_DIFF_LINES
        lines = [*lines[:_MAX_DIFF_LINES], f"... ({more} more diff lines)\n"]
    return "".join(lines)
