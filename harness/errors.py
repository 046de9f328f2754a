"""Errors that the CLI reports without a traceback: :class:`HarnessError` (one line, exit 2) and
:class:`ChildError` (user code ended its run, exit 1), and the one-line description of an
exception raised in code we run."""

from __future__ import annotations

import traceback
from collections.abc import Sequence


class HarnessError(Exception):
    """A user-facing error: bad input, a missing file, an unknown name."""


def describe_error(exc: BaseException) -> str:
    """``Type: message (file:line)``, where the line is the innermost frame that raised."""
    # Frames of the import machinery say nothing; a SyntaxError names its file and line itself.
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    if isinstance(exc, SyntaxError):
        where = ""
    if isinstance(exc, SystemExit):
        return f"SystemExit: sys.exit({exc.code!r}) called{where}"
    return f"{type(exc).__name__}: {exc}{where}"


class ChildError(Exception):
    """Code run by :func:`harness.child.run_in_child` did not return: ``how`` it ended, during
    ``step`` (the last step it marked), and its ``last_lines`` of output."""

    def __init__(self, how: str, step: str | None, last_lines: Sequence[str]) -> None:
        self.how = how
        self.step = step
        self.last_lines = tuple(last_lines)
        super().__init__(how)

    def summary(self) -> str:
        """One line: how it ended, and during which step."""
        return self.how if self.step is None else f"{self.how}, while {self.step} ran"

    def __str__(self) -> str:
        return with_last_lines(self.summary(), self.last_lines)


def with_last_lines(text: str, last_lines: Sequence[str]) -> str:
    """``text``, then the child's last lines, indented, if it printed any."""
    if not last_lines:
        return text
    return "\n".join([f"{text}; its last lines:", *(f"  | {line}" for line in last_lines)])
