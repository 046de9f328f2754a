"""Golden files: versioned, sorted, diff-friendly JSON snapshots under ``golden/``.

A golden file is ``golden/<name>.json``::

    {
      "header": {"format": 1, "generator": "harness 0.1.0", "vllm_version": "0.9.0",
                 "vllm_deviations": "docs/fidelity.md"},
      "data": ...
    }

Keys are sorted and floats rounded so that a change shows as a small diff. Goldens are written only
on purpose (``pytest --update-golden``); a mismatch writes ``<name>.obtained.json`` beside the golden
so CI can upload it, and the failure prints the diff and the command that regenerates it.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import cast

from harness import VLLM_DEVIATIONS, VLLM_VERSION, __version__

FORMAT_VERSION = 1
FLOAT_DIGITS = 6
_NAME = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")


class GoldenOutcome(Enum):
    """What a golden check did."""

    MATCHED = "matched"
    CREATED = "created"
    UPDATED = "updated"


class GoldenMismatch(AssertionError):
    """The obtained data differs from the golden file (or the golden file is missing)."""


def _normalise(value: object) -> object:
    if isinstance(value, float):
        return round(value, FLOAT_DIGITS)
    if isinstance(value, dict):
        items = cast("dict[object, object]", value).items()
        return {str(k): _normalise(v) for k, v in items}
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in cast("list[object]", value)]
    return value


def render(data: object) -> str:
    """The golden file text for ``data`` (JSON-serialisable)."""
    header = {"format": FORMAT_VERSION, "generator": f"harness {__version__}"}
    header["vllm_version"] = VLLM_VERSION
    header["vllm_deviations"] = VLLM_DEVIATIONS
    document = {"header": header, "data": _normalise(data)}
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _data_of(text: str) -> object:
    return json.loads(text).get("data")


@dataclass
class GoldenStore:
    """Golden files under ``root``; ``update`` allows writing them."""

    root: Path
    update: bool = False
    regenerate_hint: str = "pytest --update-golden"

    def path(self, name: str) -> Path:
        """The golden file of snapshot ``name`` (e.g. ``"reference/hybrid-two-groups"``)."""
        if not _NAME.match(name) or any(part in (".", "..") for part in name.split("/")):
            raise ValueError(f"bad golden name {name!r}: use letters, digits, '_', '-', '.', '/'")
        return self.root / f"{name}.json"

    def check(self, name: str, data: object) -> GoldenOutcome:
        """Compare ``data`` with golden ``name``; write it instead when updating."""
        path = self.path(name)
        obtained = render(data)
        expected = path.read_text(encoding="utf-8") if path.exists() else None
        obtained_path = path.with_suffix(".obtained.json")
        if expected is not None and _data_of(expected) == _data_of(obtained):
            obtained_path.unlink(missing_ok=True)
            return GoldenOutcome.MATCHED
        if self.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(obtained, encoding="utf-8")
            obtained_path.unlink(missing_ok=True)
            return GoldenOutcome.CREATED if expected is None else GoldenOutcome.UPDATED
        path.parent.mkdir(parents=True, exist_ok=True)
        obtained_path.write_text(obtained, encoding="utf-8")
        if expected is None:
            raise GoldenMismatch(
                f"golden file {path} does not exist; obtained data written to {obtained_path}.\n"
                f"Create it on purpose with: {self.regenerate_hint}"
            )
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                obtained.splitlines(keepends=True),
                fromfile=str(path),
                tofile=str(obtained_path),
                n=2,
            )
        )
        lines = diff.splitlines(keepends=True)
        if len(lines) > 80:
            diff = "".join(lines[:80]) + f"... ({len(lines) - 80} more diff lines)\n"
        raise GoldenMismatch(
            f"golden mismatch for {name!r}:\n{diff}"
            f"Obtained data written to {obtained_path}.\n"
            f"If the change is intended, regenerate with: {self.regenerate_hint}"
        )
