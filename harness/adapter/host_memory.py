"""Pinned host memory as ordinary host memory, for builders run on a CPU-only torch.

vLLM allocates some host buffers with ``pin_memory=True`` (vLLM 0.9's MLA builder does so inside
``build``); a CPU-only torch has no pinned allocator and refuses. :class:`HostMemoryOnly` drops
the flag and makes ``Tensor.pin_memory()`` the identity: the values are the same. Its frames are
never an allocation's source (:func:`harness.memory.allocation.skip_frames_in`): the memory
tracker names the vLLM line that allocated.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from harness.memory.allocation import skip_frames_in


class HostMemoryOnly(TorchFunctionMode):
    """Pinned host memory becomes ordinary host memory (a CPU-only torch has no pinned
    allocator; the values are the same): ``pin_memory=True`` and ``Tensor.pin_memory()``."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func is torch.Tensor.pin_memory:
            return args[0]
        if kwargs and kwargs.get("pin_memory"):
            kwargs = {**kwargs, "pin_memory": False}
        return func(*args, **(kwargs or {}))


skip_frames_in(__file__)
