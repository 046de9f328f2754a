"""Errors that the CLI reports as one clean line and exit code 2 (no traceback), and the one-line
description of an exception raised in code we run."""

from __future__ import annotations

import traceback


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
