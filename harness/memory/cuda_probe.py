"""Measure device memory on a real CUDA GPU, and refuse to measure where there is none.

Without CUDA torch's ``max_memory_allocated()`` returns 0, which would pass every budget, so
:func:`cuda_unavailable_reason` says why a measurement is impossible and callers skip with it;
everything else raises :class:`CudaUnavailableError` there.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch

from harness.errors import HarnessError
from harness.memory.sizes import format_size


class CudaUnavailableError(HarnessError):
    """A CUDA measurement was requested where CUDA is not usable; the message says why."""


def cuda_unavailable_reason(device_index: int = 0) -> str | None:
    """Why CUDA memory cannot be measured on ``device_index`` here, or ``None`` if it can."""
    if torch.version.cuda is None and torch.version.hip is None:
        return (
            f"torch {torch.__version__} is built without CUDA, so max_memory_allocated() would "
            "report 0 bytes and every budget would pass"
        )
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False (no GPU or driver visible to this process)"
    count = torch.cuda.device_count()
    if device_index >= count:
        return f"CUDA device {device_index} requested but only {count} visible"
    return None


def _require_cuda(device_index: int) -> None:
    reason = cuda_unavailable_reason(device_index)
    if reason is not None:
        raise CudaUnavailableError(f"cannot measure CUDA memory: {reason}")


@dataclass(frozen=True, slots=True)
class CudaMemoryStats:
    """One reading of a GPU's memory as torch's allocator, the driver and NVML see it."""

    device_index: int
    name: str
    total_bytes: int
    """``mem_get_info`` total: the "total capacity" of torch's out-of-memory message."""
    free_bytes: int
    """``mem_get_info`` free, over all processes."""
    allocated_bytes: int
    max_allocated_bytes: int
    reserved_bytes: int
    max_reserved_bytes: int
    process_bytes: int | None
    """This process's device memory from NVML; ``None`` when NVML cannot tell (see the note)."""
    process_note: str = ""
    """How NVML's entry for this process was found, or why there is none."""

    @property
    def non_torch_bytes(self) -> int | None:
        """Device memory of this process outside torch's allocator; ``None`` without NVML."""
        if self.process_bytes is None:
            return None
        return self.process_bytes - self.reserved_bytes


def probe(device_index: int = 0) -> CudaMemoryStats:
    """Read every memory counter of ``device_index``; :class:`CudaUnavailableError` without CUDA."""
    _require_cuda(device_index)
    free, total = torch.cuda.mem_get_info(device_index)
    lookup = nvml_process_lookup(device_index)
    return CudaMemoryStats(
        device_index=device_index,
        name=torch.cuda.get_device_name(device_index),
        total_bytes=total,
        free_bytes=free,
        allocated_bytes=torch.cuda.memory_allocated(device_index),
        max_allocated_bytes=torch.cuda.max_memory_allocated(device_index),
        reserved_bytes=torch.cuda.memory_reserved(device_index),
        max_reserved_bytes=torch.cuda.max_memory_reserved(device_index),
        process_bytes=lookup.used_bytes,
        process_note=lookup.how,
    )


@dataclass(frozen=True, slots=True)
class NvmlLookup:
    """This process's device memory according to NVML, and how it was found (or why not)."""

    used_bytes: int | None
    how: str


def own_pids(status_path: str = "/proc/self/status") -> tuple[int, ...]:
    """This process's PIDs: ``os.getpid()`` and, where procfs shows them, its PID in every PID
    namespace from the one ``/proc`` was mounted in down to its own (the ``NSpid`` line)."""
    pids = [os.getpid()]
    try:
        with open(status_path, encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("NSpid:"):
                    pids += [int(p) for p in line.split()[1:] if p.isdigit()]
    except OSError:
        pass
    return tuple(dict.fromkeys(pids))


def match_process(
    processes: Sequence[tuple[int, int | None]], pids: Collection[int], reserved_bytes: int
) -> NvmlLookup:
    """Pick this process among NVML's ``(pid, used bytes)`` entries of one device: by PID, else
    (host PIDs in a container) the one entry whose usage covers torch's ``reserved_bytes``.
    """
    for pid, used in processes:
        if pid in pids:
            if used is None:
                return NvmlLookup(None, f"NVML lists pid {pid} without a memory count")
            return NvmlLookup(int(used), f"NVML pid {pid}")
    listed = sorted(pid for pid, _ in processes)
    covering = [
        (pid, used) for pid, used in processes if used is not None and used >= reserved_bytes
    ]
    if len(covering) == 1 and (reserved_bytes > 0 or len(processes) == 1):
        pid, used = covering[0]
        return NvmlLookup(
            int(used),
            f"NVML pid {pid}, matched by memory: the only process using at least torch's "
            f"reserved {format_size(reserved_bytes)} (this process is pid {', '.join(map(str, pids))} "
            "here: a PID namespace)",
        )
    return NvmlLookup(
        None,
        f"NVML lists pids {listed or 'none'} and this process is pid "
        f"{', '.join(map(str, pids))}: a PID namespace hides which one is ours",
    )


def nvml_process_lookup(device_index: int = 0) -> NvmlLookup:
    """This process's memory on ``device_index`` according to NVML (see :func:`match_process`)."""
    try:
        nvml: Any = importlib.import_module("pynvml")
    except ImportError:
        return NvmlLookup(None, "no NVML: nvidia-ml-py is not installed")
    try:
        props: Any = getattr(torch.cuda, "get_device_properties")(device_index)  # noqa: B009
        bus_id = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        reserved = int(torch.cuda.memory_reserved(device_index))
        nvml.nvmlInit()
        try:
            handle = nvml.nvmlDeviceGetHandleByPciBusId(bus_id.encode())
            processes = [
                (int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory))
                for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            ]
        finally:
            nvml.nvmlShutdown()
    except Exception as exc:  # NVML is optional diagnostics: say why it is unknown
        return NvmlLookup(None, f"NVML failed: {type(exc).__name__}: {exc}")
    lookup = match_process(processes, own_pids(), reserved)
    return NvmlLookup(lookup.used_bytes, f"{lookup.how}; device {bus_id}")


def nvml_process_bytes(device_index: int = 0) -> int | None:
    """This process's memory on ``device_index`` according to NVML, or ``None``."""
    return nvml_process_lookup(device_index).used_bytes


class CudaPeak:
    """Peak allocated bytes of a block above the bytes allocated when it started."""

    def __init__(self, device_index: int = 0) -> None:
        self.device_index = device_index
        self.baseline_bytes = 0
        """Bytes allocated by torch when the block started."""
        self.peak_bytes = 0
        """Highest allocated bytes during the block minus ``baseline_bytes``."""
        self.before: CudaMemoryStats | None = None
        self.after: CudaMemoryStats | None = None

    def __enter__(self) -> CudaPeak:
        _require_cuda(self.device_index)
        torch.cuda.synchronize(self.device_index)
        torch.cuda.reset_peak_memory_stats(self.device_index)
        self.before = probe(self.device_index)
        self.baseline_bytes = self.before.allocated_bytes
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        torch.cuda.synchronize(self.device_index)
        self.after = probe(self.device_index)
        self.peak_bytes = self.after.max_allocated_bytes - self.baseline_bytes
