"""harness.memory.cuda_probe: fails closed on this CPU machine; the arithmetic on a fake GPU."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.errors import HarnessError
from harness.memory import cuda_probe
from harness.memory.cuda_probe import (
    CudaMemoryStats,
    CudaPeak,
    CudaUnavailableError,
    NvmlLookup,
    cuda_unavailable_reason,
    match_process,
    nvml_process_bytes,
    nvml_process_lookup,
    own_pids,
    probe,
)

needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")


@needs_no_cuda
def test_without_cuda_every_measurement_refuses_with_a_reason() -> None:
    reason = cuda_unavailable_reason()
    assert reason is not None and ("without CUDA" in reason or "is_available" in reason)
    with pytest.raises(CudaUnavailableError, match="cannot measure CUDA memory") as info:
        probe()
    assert isinstance(info.value, HarnessError)
    with pytest.raises(CudaUnavailableError), CudaPeak():
        pytest.fail("the block must not run without CUDA")
    # the reason the probe exists: torch's counters read 0 here, which would pass any budget
    assert torch.cuda.max_memory_allocated() == 0


@needs_no_cuda
def test_nvml_is_optional(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not importable
    assert nvml_process_bytes() is None
    assert nvml_process_lookup().how == "no NVML: nvidia-ml-py is not installed"


class FakeCuda:
    """Stands in for torch.cuda on a CPU machine: a 1 GiB GPU whose allocator we drive by hand."""

    def __init__(self) -> None:
        self.allocated = 100
        self.max_allocated = 5000  # left over from earlier work: must be reset by CudaPeak
        self.reserved = 2 << 20
        self.synchronized = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        fake = types.SimpleNamespace(
            is_available=lambda: True,
            device_count=lambda: 1,
            mem_get_info=lambda index=0: (1 << 29, 1 << 30),
            get_device_name=lambda index=0: "Fake GPU",
            memory_allocated=lambda index=0: self.allocated,
            max_memory_allocated=lambda index=0: self.max_allocated,
            memory_reserved=lambda index=0: self.reserved,
            max_memory_reserved=lambda index=0: self.reserved,
            reset_peak_memory_stats=self.reset,
            synchronize=self.synchronize,
        )
        monkeypatch.setattr(cuda_probe.torch, "cuda", fake)
        monkeypatch.setattr(cuda_probe.torch.version, "cuda", "12.8")
        lookup = NvmlLookup(3 << 20, "NVML pid 42")
        monkeypatch.setattr(cuda_probe, "nvml_process_lookup", lambda index=0: lookup)

    def reset(self, index: int = 0) -> None:
        self.max_allocated = self.allocated

    def synchronize(self, index: int = 0) -> None:
        self.synchronized += 1

    def alloc(self, nbytes: int) -> None:
        self.allocated += nbytes
        self.max_allocated = max(self.max_allocated, self.allocated)


def test_cuda_peak_is_the_rise_above_the_start_after_a_reset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpu = FakeCuda()
    gpu.install(monkeypatch)
    assert cuda_unavailable_reason() is None
    assert cuda_unavailable_reason(1) == "CUDA device 1 requested but only 1 visible"
    with CudaPeak() as peak:
        gpu.alloc(1000)
        gpu.alloc(-1000)
        gpu.alloc(300)
    assert peak.baseline_bytes == 100
    assert peak.peak_bytes == 1000
    assert gpu.synchronized == 2
    assert peak.after is not None and peak.after.allocated_bytes == 400


def test_probe_reads_every_counter_and_non_torch_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeCuda().install(monkeypatch)
    stats = probe()
    assert stats == CudaMemoryStats(
        device_index=0,
        name="Fake GPU",
        total_bytes=1 << 30,
        free_bytes=1 << 29,
        allocated_bytes=100,
        max_allocated_bytes=5000,
        reserved_bytes=2 << 20,
        max_reserved_bytes=2 << 20,
        process_bytes=3 << 20,
        process_note="NVML pid 42",
    )
    assert stats.non_torch_bytes == 1 << 20


def test_unknown_non_torch_without_nvml() -> None:
    stats = CudaMemoryStats(0, "x", 1, 1, 0, 0, 0, 0, process_bytes=None)
    assert stats.non_torch_bytes is None


# --- NVML: this process inside PID namespaces, the device by PCI bus id (issue 20) ------------


def test_own_pids_include_every_namespace_pid(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nPid:\t12\nNSpid:\t48213\t12\nPPid:\t1\n")
    assert own_pids(str(status)) == (os.getpid(), 48213, 12)
    assert own_pids(str(tmp_path / "missing")) == (os.getpid(),)


@pytest.mark.parametrize(
    ("processes", "pids", "reserved", "expected", "how"),
    [
        ([(7, 10), (12, 3 << 30)], (12,), 1 << 30, 3 << 30, "NVML pid 12"),
        ([(48213, 3 << 30)], (12, 48213), 1 << 30, 3 << 30, "NVML pid 48213"),
        # A container: NVML shows host pids; one process covers torch's reserved pool.
        ([(48213, 3 << 30), (5000, 200 << 20)], (12,), 1 << 30, 3 << 30, "matched by memory"),
        ([(48213, 3 << 30)], (12,), 0, 3 << 30, "matched by memory"),
        # Two candidates, or nothing reserved yet with several processes: cannot tell.
        ([(48213, 3 << 30), (5000, 4 << 30)], (12,), 1 << 30, None, "hides which one is ours"),
        ([(48213, 3 << 30), (5000, 4 << 30)], (12,), 0, None, "hides which one is ours"),
        ([], (12,), 0, None, "NVML lists pids none"),
        ([(12, None)], (12,), 0, None, "without a memory count"),
    ],
    ids=[
        "pid",
        "nspid",
        "namespace-by-memory",
        "namespace-only-process",
        "ambiguous",
        "ambiguous-nothing-reserved",
        "no-process",
        "no-count",
    ],
)
def test_match_process(
    processes: list[tuple[int, int | None]],
    pids: tuple[int, ...],
    reserved: int,
    expected: int | None,
    how: str,
) -> None:
    lookup = match_process(processes, pids, reserved)
    assert lookup.used_bytes == expected
    assert how in lookup.how


def _fake_nvml(monkeypatch: pytest.MonkeyPatch, processes: list[Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {"init": 0, "shutdown": 0}

    def by_bus_id(bus_id: bytes) -> str:
        seen["bus_id"] = bus_id
        return "handle"

    fake = types.SimpleNamespace(
        nvmlInit=lambda: seen.__setitem__("init", seen["init"] + 1),
        nvmlShutdown=lambda: seen.__setitem__("shutdown", seen["shutdown"] + 1),
        nvmlDeviceGetHandleByPciBusId=by_bus_id,
        nvmlDeviceGetComputeRunningProcesses=lambda handle: processes,
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    props = types.SimpleNamespace(pci_domain_id=0, pci_bus_id=0x3B, pci_device_id=0)
    cuda = types.SimpleNamespace(
        get_device_properties=lambda index: props, memory_reserved=lambda index: 1 << 30
    )
    monkeypatch.setattr(cuda_probe.torch, "cuda", cuda)
    return seen


def test_nvml_lookup_names_the_device_by_pci_bus_id_and_finds_this_pid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entry = types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=3 << 30)
    seen = _fake_nvml(monkeypatch, [types.SimpleNamespace(pid=1, usedGpuMemory=1), entry])
    lookup = nvml_process_lookup(0)
    assert lookup.used_bytes == 3 << 30
    assert seen["bus_id"] == b"0000:3b:00.0"  # never NVML's index: its order is not CUDA's
    assert seen["init"] == seen["shutdown"] == 1
    assert lookup.how == f"NVML pid {os.getpid()}; device 0000:3b:00.0"


def test_nvml_lookup_inside_a_pid_namespace_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    host = [types.SimpleNamespace(pid=10**7 + 1, usedGpuMemory=5 << 30)]
    host.append(types.SimpleNamespace(pid=10**7 + 2, usedGpuMemory=6 << 30))
    monkeypatch.setattr(cuda_probe, "own_pids", lambda: (12,))
    _fake_nvml(monkeypatch, host)
    lookup = nvml_process_lookup(0)
    assert lookup.used_bytes is None
    assert "a PID namespace hides which one is ours" in lookup.how
    assert nvml_process_bytes(0) is None


def test_nvml_failure_is_a_reason_not_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _fake_nvml(monkeypatch, [])

    def broken(bus_id: bytes) -> str:
        raise RuntimeError("NVML_ERROR_NOT_FOUND")

    sys.modules["pynvml"].nvmlDeviceGetHandleByPciBusId = broken  # type: ignore[attr-defined]
    lookup = nvml_process_lookup(0)
    assert lookup == NvmlLookup(None, "NVML failed: RuntimeError: NVML_ERROR_NOT_FOUND")
    assert seen["shutdown"] == 1
