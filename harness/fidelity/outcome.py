"""What a side of a differential produced, in a form that compares exactly and prints readably.

:func:`normalise` turns tensors, arrays, dataclasses and exceptions into plain data (an exception
becomes its nearest built-in class and its collapsed message, as ``docs/fidelity.md`` describes);
:func:`first_difference` compares two of them.
"""

from __future__ import annotations

import builtins
import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch

_WHITESPACE = re.compile(r"\s+")


def builtin_exception_name(exc: BaseException) -> str:
    """The nearest built-in exception class of ``exc`` (its own class when built in)."""
    for cls in type(exc).__mro__:
        if vars(builtins).get(cls.__name__) is cls:
            name: str = cls.__name__
            return name
    return type(exc).__name__


def exception_message(exc: BaseException) -> str:
    """``exc``'s arguments joined by spaces, whitespace collapsed."""
    return _WHITESPACE.sub(" ", " ".join(str(a) for a in exc.args)).strip()


def normalise(value: object) -> Any:
    """A plain, exactly comparable view of ``value`` (see the module docstring)."""
    if isinstance(value, BaseException):
        return {"raises": builtin_exception_name(value), "message": exception_message(value)}
    if isinstance(value, torch.Tensor):
        view: dict[str, Any] = {"tensor": str(value.dtype).removeprefix("torch.")}
        view["shape"] = list(value.shape)
        if not value.is_meta:
            host = value.detach().cpu()
            if host.dtype in (torch.bfloat16, torch.float16):
                host = host.float()  # exact; numpy has no bfloat16
            values: Any = host.numpy().tolist()
            view["values"] = values
        return view
    if isinstance(value, (np.ndarray, np.generic)):
        array = cast(Any, value)
        if isinstance(value, np.generic):
            return array.item()
        return {"array": str(array.dtype), "shape": list(array.shape), "values": array.tolist()}
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: normalise(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        mapping = cast("Mapping[object, object]", value)
        return {str(k): normalise(v) for k, v in mapping.items()}
    if isinstance(value, (list, tuple)):
        items = cast("Sequence[object]", value)
        return [normalise(v) for v in items]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(
        f"cannot compare a {type(value).__qualname__}; normalise it in the differential"
    )


def first_difference(vllm: object, reference: object, path: str = "") -> str | None:
    """Where two normalised outcomes first differ (``None`` when equal), as ``path: a != b``.

    One allowance: where vLLM raises with an EMPTY message (a bare ``NotImplementedError``), the
    reference may explain itself; the exception class must still match.
    """
    theirs, ours = vllm, reference  # kept un-narrowed for the leaf comparison
    if isinstance(vllm, Mapping) and isinstance(reference, Mapping):
        v_map = cast("Mapping[str, Any]", vllm)
        r_map = cast("Mapping[str, Any]", reference)
        if "raises" in v_map and v_map.get("message") == "" and "raises" in r_map:
            return first_difference(v_map["raises"], r_map["raises"], f"{path}.raises")
        for key in sorted(set(v_map) | set(r_map)):
            if key not in r_map:
                return f"{path}.{key}: only vLLM has it ({_short(v_map[key])})"
            if key not in v_map:
                return f"{path}.{key}: only the reference has it ({_short(r_map[key])})"
            found = first_difference(v_map[key], r_map[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(vllm, list) and isinstance(reference, list):
        v_seq = cast("list[Any]", cast(object, vllm))
        r_seq = cast("list[Any]", cast(object, reference))
        for i, (v, r) in enumerate(zip(v_seq, r_seq, strict=False)):
            found = first_difference(v, r, f"{path}[{i}]")
            if found:
                return found
        if len(v_seq) != len(r_seq):
            return f"{path}: length {len(v_seq)} (vLLM) != {len(r_seq)} (reference)"
        return None
    if type(theirs) is not type(ours) or theirs != ours:
        return f"{path or 'outcome'}: vLLM {_short(theirs)} != reference {_short(ours)}"
    return None


def _short(value: object, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
