"""Byte sizes: parse human input ("64 MiB", "2GB") and print sizes the way torch does.

:func:`parse_size` takes binary (``KiB``..``TiB``) and decimal (``KB``..``TB``) units, any case,
fractions, or bare bytes; bad input raises :class:`harness.errors.HarnessError`.
:func:`format_size` is exactly torch's ``format_size`` (``c10/cuda/CUDACachingAllocator.cpp``).
"""

from __future__ import annotations

import re

from harness.errors import HarnessError

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
TiB = 1024 * GiB

UNITS: dict[str, int] = {
    "b": 1,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
}
"""Unit suffix (lower case) -> bytes per unit."""

_UNIT_NAMES = "B, KiB, MiB, GiB, TiB, KB, MB, GB, TB"
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int) -> int:
    """The bytes ``text`` denotes, e.g. ``parse_size("64 MiB") == 67108864``; an ``int`` (not
    negative) is returned unchanged, fractions are rounded down.
    """
    if isinstance(text, bool):
        raise HarnessError(f"invalid size {text!r}: expected a number of bytes or e.g. '64 MiB'")
    if isinstance(text, int):
        if text < 0:
            raise HarnessError(f"invalid size {text}: sizes cannot be negative")
        return text
    match = _SIZE_RE.match(text)
    if match is None:
        raise HarnessError(
            f"invalid size {text!r}: expected a number and a unit, e.g. '64 MiB' or '2 GB' "
            f"(units: {_UNIT_NAMES})"
        )
    number, unit = match.groups()
    factor = UNITS.get(unit.lower() or "b")
    if factor is None:
        raise HarnessError(f"invalid size {text!r}: unknown unit {unit!r} (units: {_UNIT_NAMES})")
    return int(float(number) * factor) if "." in number else int(number) * factor


def format_size(num_bytes: int) -> str:
    """Format ``num_bytes`` exactly as torch's CUDA caching allocator does in its OOM message."""
    if num_bytes <= KiB:
        return f"{num_bytes} bytes"
    if num_bytes <= MiB:
        return f"{num_bytes / KiB:.2f} KiB"
    if num_bytes <= GiB:
        return f"{num_bytes / MiB:.2f} MiB"
    return f"{num_bytes / GiB:.2f} GiB"
