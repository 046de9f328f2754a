"""Structured findings. Formatting happens last (``report.py``); nothing inspects message text."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any


class Severity(str, Enum):
    """``error``: a proven crash. ``warning``: drift or bad input without such proof."""

    ERROR = "error"
    WARNING = "warning"

    @property
    def rank(self) -> int:
        """Higher is more severe."""
        return 2 if self is Severity.ERROR else 1


@dataclass(frozen=True, slots=True)
class Evidence:
    """A call in the project that the override rejects, and the ``TypeError`` it raises."""

    path: str
    line: int
    col: int
    text: str
    """The source line of the call, stripped."""
    error: str
    """``TypeError: C.m() got an unexpected keyword argument 'x'``."""
    receiver: str
    """``self``, ``super()``, ``constructed`` or ``annotated``."""
    unreached: str | None = None
    """Why the call cannot run for the class holding the override (then not an error)."""
    via: str | None = None
    """The ``*args, **kwargs`` method that forwards the call's arguments, if any."""
    untyped: str | None = None
    """Why the call reaches the class only through an object of unknown type (not an error)."""
    guards: tuple[str, ...] = ()
    """Source text of the conditions the call runs under in its function."""

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the shared contract plus the TypeError text."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "col"}
        return {**out, "guards": list(self.guards)}


@dataclass(frozen=True, slots=True)
class Difference:
    """One way an override's signature drifts from its base's, as one drift rule says it."""

    code: str
    symbol: str
    message: str
    params: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The JSON object: code, symbol, message, params."""
        return {**asdict(self), "params": list(self.params)}


@dataclass(frozen=True, slots=True)
class Finding:
    """One reported problem; for drift, at the override's ``def`` line, with every difference of the
    two signatures (the first gives ``code`` and ``symbol``), once per override and call site."""

    path: str
    line: int
    col: int
    code: str
    symbol: str
    severity: Severity
    message: str
    class_name: str | None = None
    """Qualified name (``module.Class``) of the class holding the override."""
    method: str | None = None
    base_class: str | None = None
    base_path: str | None = None
    base_line: int | None = None
    params: tuple[str, ...] = ()
    """The drifted parameter names; part of the baseline key."""
    signature: str | None = None
    base_signature: str | None = None
    evidence: Evidence | None = None
    differences: tuple[Difference, ...] = ()
    extra_key: str = field(default="", compare=False)
    """Baseline key part for findings without a class (e.g. the ignore comment's codes)."""

    def sort_key(self) -> tuple[str, int, int, str, str]:
        """Sort order of every output format: (path, line, col, code)."""
        return (self.path, self.line, self.col, self.code, self.message)

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the shared contract (plus signatures and drifted params)."""
        head = {
            "class" if f.name == "class_name" else f.name: getattr(self, f.name)
            for f in fields(self)[:12]  # path ... base_line, the message after them
            if f.name != "message"
        }
        return {
            **head,
            "severity": self.severity.value,
            "message": self.message,
            "params": list(self.params),
            "signature": self.signature,
            "base_signature": self.base_signature,
            "evidence": None if self.evidence is None else self.evidence.to_json(),
            "differences": [d.to_json() for d in self.differences],
        }
