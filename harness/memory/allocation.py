"""What one allocation event carries, and the source line it is attributed to.

An :class:`Allocation` is made by an event source and counted by the
:class:`~harness.memory.ledger.Ledger`. Its :class:`SourceLine` is the first frame, outwards from
the op, that is neither torch's nor this package's (skipped by the directory its file lives in).
"""

from __future__ import annotations

import linecache
import os
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

import torch

from harness.cpython_compat import getframe
from harness.memory.sizes import format_size

SKIPPED_DIRS: tuple[str, ...] = (
    os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
)
"""Frames whose file is under one of these directories are never an allocation's source."""

_skipped_code: dict[CodeType, bool] = {}


_skipped_paths: list[str] = list(SKIPPED_DIRS)
""":data:`SKIPPED_DIRS` and the files added by :func:`skip_frames_in`."""


def skip_frames_in(path: str) -> None:
    """Never attribute an allocation to a frame of the file ``path``: for code that only
    forwards ops, such as a ``TorchFunctionMode``."""
    path = os.path.abspath(path)
    if path not in _skipped_paths:
        _skipped_paths.append(path)
        _skipped_code.clear()


@dataclass(frozen=True, slots=True)
class SourceLine:
    """A Python source position: ``path:line`` plus the text of that line (read lazily)."""

    path: str
    line: int

    @property
    def text(self) -> str:
        """The stripped source text of the line, or ``""`` when the file cannot be read."""
        return linecache.getline(self.path, self.line).strip()

    def __str__(self) -> str:
        return f"{_display_path(self.path)}:{self.line}"


@dataclass(slots=True)
class Allocation:
    """One storage allocated under a tracker (or registered as already existing); not changed
    after it is made."""

    op: str
    """The aten overload that allocated, e.g. ``aten.clone.default``, or a baseline label."""
    nbytes: int
    """Bytes of the storage (the new size for a growing resize)."""
    shape: tuple[int, ...]
    """Shape of the first output tensor that uses the storage."""
    dtype: torch.dtype
    device: str
    """Device type: ``cpu``, ``meta`` or ``cuda``."""
    source: SourceLine | None
    """The first frame outside torch and ``harness.memory``; ``None`` when there is none (or for
    tensors registered as already existing, whose allocation was never seen)."""
    region: str | None
    """Innermost ledger region active when the storage was allocated."""

    @property
    def site(self) -> tuple[str, str | None]:
        """``(op, "path:line")``: what allocations are grouped by."""
        return self.op, None if self.source is None else str(self.source)

    def describe(self) -> str:
        """One line: size, op, shape/dtype/device and source."""
        shape = "x".join(str(d) for d in self.shape) or "scalar"
        where = f" at {self.source}" if self.source is not None else ""
        dtype = str(self.dtype).removeprefix("torch.")
        return f"{format_size(self.nbytes):>12}  {self.op} [{shape} {dtype} {self.device}]{where}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: op, nbytes, shape, dtype, device, source, line_text, region."""
        return {
            "op": self.op,
            "nbytes": self.nbytes,
            "shape": list(self.shape),
            "dtype": str(self.dtype).removeprefix("torch."),
            "device": self.device,
            "source": None if self.source is None else str(self.source),
            "line_text": None if self.source is None else self.source.text,
            "region": self.region,
        }


def caller_source(depth: int = 1) -> SourceLine | None:
    """The source line of the first frame, ``depth`` frames above the caller or further out, that
    is neither torch's nor ``harness.memory``'s."""
    frame: FrameType | None = getframe(depth + 1)
    skipped = _skipped_code
    while frame is not None:
        code = frame.f_code
        skip = skipped.get(code)
        if skip is None:
            skip = skipped[code] = os.path.abspath(code.co_filename).startswith(
                tuple(_skipped_paths)
            )
        if not skip:
            return SourceLine(code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def _display_path(path: str) -> str:
    # Not cached: relative to the working directory at the time of display, which can change.
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative
