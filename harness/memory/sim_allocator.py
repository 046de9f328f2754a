"""A simulated CUDA device: a capacity policy for the ledger, shaped like torch's caching allocator.

:class:`SimulatedDevice` (``SimulatedDevice("h100-95")``) is a
:class:`~harness.memory.ledger.CapacityPolicy`: ``Ledger(capacity=device)`` counts every
allocation in torch's block sizes (512-byte rounding, 2 MiB / 20 MiB segments, as
``c10/cuda/CUDACachingAllocator.cpp``) and refuses one that does not fit with
:class:`SimulatedOutOfMemoryError`, whose first line is exactly torch 2.7's message (the torch
vLLM 0.9.0 pins). Segments are returned as soon as they are empty, so ``reserved_bytes`` is a
lower bound of the real allocator's; ``docs/simulation.md`` has the rounding rules.
"""

from __future__ import annotations

from typing import Any

import torch

from harness.errors import HarnessError
from harness.memory.allocation import Allocation, SourceLine
from harness.memory.devices import DeviceProfile, get_device_profile
from harness.memory.sizes import MiB, format_size

MIN_BLOCK_SIZE = 512
"""``kMinBlockSize``: every block is a multiple of this."""
SMALL_SIZE = 1 * MiB
"""``kSmallSize``: largest block served from the small pool."""
SMALL_BUFFER = 2 * MiB
"""``kSmallBuffer``: segment size of the small pool."""
MIN_LARGE_ALLOC = 10 * MiB
"""``kMinLargeAlloc``: blocks below this share ``LARGE_BUFFER`` segments."""
LARGE_BUFFER = 20 * MiB
"""``kLargeBuffer``: shared segment for blocks between 1 MiB and 10 MiB."""
ROUND_LARGE = 2 * MiB
"""``kRoundLarge``: larger blocks get their own segment rounded up to this."""

TORCH_OOM_ADVICE = (
    "If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
    "See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)
"""The fixed tail of torch 2.7's CUDA out-of-memory message."""


def round_size(nbytes: int) -> int:
    """The block size torch's caching allocator uses for a request of ``nbytes``."""
    if nbytes < MIN_BLOCK_SIZE:  # every allocation passes here: no max() call
        return MIN_BLOCK_SIZE
    return -(-nbytes // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE


def allocation_size(block_bytes: int) -> int:
    """The segment size torch requests from the driver for a block (its "Tried to allocate")."""
    if block_bytes <= SMALL_SIZE:
        return SMALL_BUFFER
    if block_bytes < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-block_bytes // ROUND_LARGE) * ROUND_LARGE


def torch_oom_message(
    *,
    requested_bytes: int,
    device_index: int,
    capacity_bytes: int,
    free_bytes: int,
    process_bytes: int,
    allocated_bytes: int,
    reserved_bytes: int,
) -> str:
    """torch's CUDA out-of-memory message for these numbers, character for character."""
    return (
        f"CUDA out of memory. Tried to allocate {format_size(requested_bytes)}. "
        f"GPU {device_index} has a total capacity of {format_size(capacity_bytes)} "
        f"of which {format_size(free_bytes)} is free. "
        f"Including non-PyTorch memory, this process has {format_size(process_bytes)} "
        "memory in use. "
        f"Of the allocated memory {format_size(allocated_bytes)} is allocated by PyTorch, "
        f"and {format_size(reserved_bytes - allocated_bytes)} is reserved by PyTorch but "
        f"unallocated. {TORCH_OOM_ADVICE}"
    )


class SimulatedOutOfMemoryError(torch.OutOfMemoryError):
    """Raised when an allocation does not fit on a :class:`SimulatedDevice`."""

    def __init__(
        self,
        torch_message: str,
        *,
        device: str,
        requested_bytes: int,
        free_bytes: int,
        capacity_bytes: int,
        allocated_bytes: int,
        allocation: Allocation,
    ) -> None:
        self.torch_message = torch_message
        self.device = device
        self.requested_bytes = requested_bytes
        self.nbytes = allocation.nbytes
        self.free_bytes = free_bytes
        self.capacity_bytes = capacity_bytes
        self.allocated_bytes = allocated_bytes
        self.allocation = allocation
        self.op: str = allocation.op
        self.source: SourceLine | None = allocation.source
        super().__init__(self._full_message())

    def _full_message(self) -> str:
        shape = "x".join(str(d) for d in self.allocation.shape) or "scalar"
        dtype = str(self.allocation.dtype).removeprefix("torch.")
        lines = [
            self.torch_message,
            f"  simulated on {self.device}: {self.op} allocating {format_size(self.nbytes)} "
            f"[{shape} {dtype}]",
        ]
        if self.source is not None:
            lines.append(f"  at {self.source}: {self.source.text}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: requested_bytes, free_bytes, message, op, source (and a few more)."""
        return {
            "requested_bytes": self.requested_bytes,
            "nbytes": self.nbytes,
            "free_bytes": self.free_bytes,
            "message": self.torch_message,
            "op": self.op,
            "source": None if self.source is None else str(self.source),
            "line_text": None if self.source is None else self.source.text,
        }


class SimulatedDevice:
    """A GPU of a given profile: torch's block sizes, segments and out-of-memory error."""

    def __init__(
        self,
        profile: DeviceProfile | str,
        *,
        non_torch_bytes: int | None = None,
        device_index: int = 0,
    ) -> None:
        self.profile = get_device_profile(profile) if isinstance(profile, str) else profile
        self.capacity_bytes = self.profile.total_memory
        self.non_torch_bytes = (
            self.profile.non_torch_bytes if non_torch_bytes is None else non_torch_bytes
        )
        if not 0 <= self.non_torch_bytes < self.capacity_bytes:
            raise HarnessError(
                f"non-torch memory must be at least 0 and less than {self.profile.name}'s "
                f"capacity of {format_size(self.capacity_bytes)}, got "
                f"{format_size(self.non_torch_bytes)}"
            )
        self.device_index = device_index
        self.peak_reserved_bytes = 0
        self._small: int = 0
        self._medium: int = 0
        self._large_reserved: int = 0
        self._reserved_bytes: int = 0

    @property
    def reserved_bytes(self) -> int:
        """Bytes held in segments (what ``torch.cuda.memory_reserved`` would say, at least)."""
        return self._reserved_bytes

    @property
    def free_bytes(self) -> int:
        """What ``cudaMemGetInfo`` would report free."""
        return self.capacity_bytes - self.non_torch_bytes - self._reserved_bytes

    def block_bytes(self, nbytes: int) -> int:
        """torch's block for a request of ``nbytes`` (what ``memory_allocated`` counts)."""
        return round_size(nbytes)

    def allocate(self, allocation: Allocation, allocated_bytes: int) -> None:
        """Reserve a block for ``allocation`` or raise :class:`SimulatedOutOfMemoryError`."""
        __tracebackhide__ = True
        # Every allocation of a simulation passes here: the pool arithmetic stays inline.
        block = round_size(allocation.nbytes)
        small, medium, large = self._small, self._medium, self._large_reserved
        if block <= SMALL_SIZE:
            small += block
        elif block < MIN_LARGE_ALLOC:
            medium += block
        else:
            large += allocation_size(block)
        reserved = self._reserved(small, medium, large)
        if reserved > self.capacity_bytes - self.non_torch_bytes:  # needs more than is free
            raise self._oom(allocation, block, allocated_bytes)
        self._small, self._medium, self._large_reserved = small, medium, large
        self._reserved_bytes = reserved
        if reserved > self.peak_reserved_bytes:
            self.peak_reserved_bytes = reserved

    def free(self, allocation: Allocation) -> None:
        """Return the block of ``allocation``."""
        block = round_size(allocation.nbytes)
        if block <= SMALL_SIZE:
            self._small -= block
        elif block < MIN_LARGE_ALLOC:
            self._medium -= block
        else:
            self._large_reserved -= allocation_size(block)
        self._reserved_bytes = self._reserved(self._small, self._medium, self._large_reserved)

    def _reserved(self, small: int, medium: int, large: int) -> int:
        return (
            -(-small // SMALL_BUFFER) * SMALL_BUFFER
            + -(-medium // LARGE_BUFFER) * LARGE_BUFFER
            + large
        )

    def _oom(
        self, allocation: Allocation, block: int, allocated_bytes: int
    ) -> SimulatedOutOfMemoryError:
        reserved = self.reserved_bytes
        message = torch_oom_message(
            requested_bytes=allocation_size(block),
            device_index=self.device_index,
            capacity_bytes=self.capacity_bytes,
            free_bytes=self.free_bytes,
            process_bytes=reserved + self.non_torch_bytes,
            allocated_bytes=allocated_bytes,
            reserved_bytes=reserved,
        )
        return SimulatedOutOfMemoryError(
            message,
            device=self.profile.name,
            requested_bytes=allocation_size(block),
            free_bytes=self.free_bytes,
            capacity_bytes=self.capacity_bytes,
            allocated_bytes=allocated_bytes,
            allocation=allocation,
        )
