"""Plain, comparable copies of what a builder returned (taken right after each ``build``).

Tensors and arrays become ``{"dtype", "shape", "values"}`` (``values`` is ``None`` past
:data:`MAX_ELEMENTS`: a workspace buffer's contents are not compared), lists that long their
length; dataclasses and objects become their fields (and attributes set after construction);
enums their names; FlashInfer wrappers are recorders, so the plans they were given are kept
(:mod:`harness.vllm_tree.provided`). Everything is JSON-ready, and no step's copy grows with
what the builder holds.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import torch

MAX_DEPTH = 6
MAX_ELEMENTS = 1 << 16
"""Tensors and arrays larger than this (workspace buffers) keep their dtype and shape only,
lists their length."""


def _tensor(value: torch.Tensor) -> dict[str, Any]:
    data = value.detach()
    values: Any = None
    if not data.is_meta and data.numel() <= MAX_ELEMENTS:
        if data.dtype.is_floating_point or data.dtype.is_complex:
            data = data.float()
        values = cast("Any", data).tolist()
    return {"dtype": str(value.dtype), "shape": list(value.shape), "values": values}


def _array(value: npt.NDArray[Any]) -> dict[str, Any]:
    values: Any = value.tolist() if value.size <= MAX_ELEMENTS else None
    return {"dtype": str(value.dtype), "shape": list(value.shape), "values": values}


def _fields(value: object, names: list[str], depth: int) -> dict[str, Any]:
    return {
        "__type__": type(value).__name__,
        **{name: snapshot(getattr(value, name, None), depth + 1) for name in names},
    }


def snapshot(value: object, depth: int = 0) -> Any:
    """A plain copy of ``value`` (module docstring)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, torch.Tensor):
        return _tensor(value)
    if isinstance(value, np.ndarray):
        return _array(cast("npt.NDArray[Any]", value))
    if isinstance(value, np.generic):
        return cast("Any", value).item()
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, torch.dtype | torch.device):
        return str(value)
    if depth >= MAX_DEPTH:
        return f"<{type(value).__name__}>"
    if isinstance(value, dict):
        mapping = cast("dict[object, object]", value)
        return {str(k): snapshot(v, depth + 1) for k, v in mapping.items()}
    if isinstance(value, list | tuple):
        items = cast("list[object]", value)
        if len(items) > MAX_ELEMENTS:
            return {"__type__": type(items).__name__, "length": len(items)}
        return [snapshot(v, depth + 1) for v in items]
    attributes: dict[str, Any] = dict(getattr(value, "__dict__", None) or {})
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = [f.name for f in dataclasses.fields(value)]
        extra = [k for k in attributes if k not in names and k[:1] != "_"]
        return _fields(value, names + extra, depth)
    if callable(value):
        return f"<{type(value).__name__} {getattr(value, '__qualname__', '')}>"
    if attributes:
        return _fields(value, [k for k in attributes if k[:1] != "_"], depth)
    return f"<{type(value).__name__}>"
