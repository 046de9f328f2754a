"""Errors that the CLI reports as one clean line and exit code 2 (no traceback)."""


class HarnessError(Exception):
    """A user-facing error: bad input, a missing file, an unknown name."""
