"""A directory a command will write into, checked before any work: it can be made and written."""

from __future__ import annotations

import os
from pathlib import Path

from harness.errors import HarnessError


def writable_directory(text: str, flag: str) -> Path:
    """``text`` as a directory that can be made and written: it, or the nearest part of it that
    exists, is a writable directory. An empty value (an unset CI variable) is refused, never read
    as the working directory (``Path("")`` is "."); errors name ``flag``."""
    if not text.strip():
        raise HarnessError(f"{flag} is empty (name the directory to write into)")
    existing = out = Path(text)
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if existing.is_symlink() and not existing.exists():
        raise HarnessError(f"{flag} {out}: {existing} is a symbolic link to nothing")
    if not existing.is_dir():
        raise HarnessError(f"{flag} {out}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise HarnessError(f"{flag} {out}: {existing} is not writable")
    return out
