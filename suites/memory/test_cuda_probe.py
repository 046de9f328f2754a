"""harness.memory.cuda_probe: fails closed on this CPU machine; the arithmetic on a fake GPU."""

from __future__ import annotations

import types

import pytest
import torch

from harness.errors import HarnessError
from harness.memory import cuda_probe
from harness.memory.cuda_probe import (
    CudaMemoryStats,
    CudaPeak,
    CudaUnavailableError,
    cuda_unavailable_reason,
    nvml_process_bytes,
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
def test_nvml_is_optional() -> None:
    assert nvml_process_bytes() is None


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
        monkeypatch.setattr(cuda_probe, "nvml_process_bytes", lambda index=0: 3 << 20)

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
    )
    assert stats.non_torch_bytes == 1 << 20
    assert stats.describe() == (
        "GPU 0 (Fake GPU): total 1024.00 MiB, free 512.00 MiB, allocated 100 bytes "
        "(peak 4.88 KiB), reserved 2.00 MiB (peak 2.00 MiB), non-torch 1024.00 KiB"
    )


def test_unknown_non_torch_without_nvml() -> None:
    stats = CudaMemoryStats(0, "x", 1, 1, 0, 0, 0, 0, process_bytes=None)
    assert stats.non_torch_bytes is None
    assert stats.describe().endswith("non-torch unknown (no NVML)")
