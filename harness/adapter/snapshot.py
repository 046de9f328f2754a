"""Plain, comparable copies of what a builder returned (taken right after each ``build``).

Tensors and arrays become ``{"dtype", "shape", "values"}`` (``values`` is ``None`` past
:data:`MAX_ELEMENTS`: a workspace buffer's contents are not compared); dataclasses and objects become
their fields (and attributes set after construction); enums their names; FlashInfer wrappers are the adapter's recorders, so the plans they
were given are kept (:mod:`harness.adapter.stubs`). Everything is JSON-ready.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any

import numpy as np
import torch

MAX_DEPTH = 6
MAX_ELEMENTS = 1 << 16
"""Tensors larger than this (workspace buffers) keep their dtype and shape only."""


def snapshot(value: Any, depth: int = 0) -> Any:
    """A plain copy of ``value`` (module docstring)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, torch.Tensor):
        data = value.detach()
        if data.is_meta or data.numel() > MAX_ELEMENTS:
            return {"dtype": str(data.dtype), "shape": list(data.shape), "values": None}
        if data.dtype.is_floating_point or data.dtype.is_complex:
            data = data.float()
        return {"dtype": str(value.dtype), "shape": list(value.shape), "values": data.tolist()}
    if isinstance(value, np.ndarray):
        return {"dtype": str(value.dtype), "shape": list(value.shape), "values": value.tolist()}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, torch.dtype | torch.device):
        return str(value)
    if depth >= MAX_DEPTH:
        return f"<{type(value).__name__}>"
    if isinstance(value, dict):
        return {str(k): snapshot(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [snapshot(v, depth + 1) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = [f.name for f in dataclasses.fields(value)]
        extra = [k for k in getattr(value, "__dict__", {}) if k not in names and k[:1] != "_"]
        return {
            "__type__": type(value).__name__,
            **{name: snapshot(getattr(value, name, None), depth + 1) for name in names + extra},
        }
    if callable(value):
        return f"<{type(value).__name__} {getattr(value, '__qualname__', '')}>"
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict):
        return {
            "__type__": type(value).__name__,
            **{k: snapshot(v, depth + 1) for k, v in fields.items() if not k.startswith("_")},
        }
    return f"<{type(value).__name__}>"
