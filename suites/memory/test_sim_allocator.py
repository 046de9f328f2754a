"""harness.memory.sim_allocator: a simulated GPU that fails like torch's caching allocator."""

from __future__ import annotations

import inspect

import pytest
import torch

from harness.errors import HarnessError
from harness.memory.devices import DeviceProfile
from harness.memory.ledger import Ledger
from harness.memory.sim_allocator import (
    SimulatedDevice,
    SimulatedOutOfMemoryError,
    allocation_size,
    round_size,
    torch_oom_message,
)
from harness.memory.sizes import GiB, MiB
from harness.memory.tracker import MemoryTracker

BF16 = torch.bfloat16


def _next_line() -> int:
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno + 1


def _tracker(device: SimulatedDevice, devices: tuple[str, ...] = ("meta",)) -> MemoryTracker:
    return MemoryTracker(Ledger(capacity=device), devices=devices, all_threads=False)


def _meta(nbytes: int) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8, device="meta")


@pytest.mark.parametrize(
    ("nbytes", "block", "segment"),
    [
        (1, 512, 2 * MiB),
        (512, 512, 2 * MiB),
        (513, 1024, 2 * MiB),
        (MiB, MiB, 2 * MiB),
        (MiB + 1, MiB + 512, 20 * MiB),
        (10 * MiB - 512, 10 * MiB - 512, 20 * MiB),
        (10 * MiB, 10 * MiB, 10 * MiB),
        (11 * MiB, 11 * MiB, 12 * MiB),
        (2_277_507_072, 2_277_507_072, 2_277_507_072),  # 1086 x 2 MiB: one layer's KV cache
        (2_277_507_073, 2_277_507_584, 2_277_507_072 + 2 * MiB),
    ],
)
def test_rounding_follows_the_cuda_caching_allocator(nbytes: int, block: int, segment: int) -> None:
    assert round_size(nbytes) == block
    assert allocation_size(block) == segment


def test_message_is_character_for_character_torchs() -> None:
    # torch 2.7, c10/cuda/CUDACachingAllocator.cpp, with NVML process info and no memory fraction
    expected = (
        "CUDA out of memory. Tried to allocate 2.12 GiB. GPU 0 has a total capacity of 95.00 GiB "
        "of which 1.01 GiB is free. Including non-PyTorch memory, this process has 93.99 GiB memory "
        "in use. Of the allocated memory 92.48 GiB is allocated by PyTorch, and 1.01 GiB is "
        "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
        "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    message = torch_oom_message(
        requested_bytes=int(2.12 * GiB),
        device_index=0,
        capacity_bytes=95 * GiB,
        free_bytes=int(1.01 * GiB),
        process_bytes=int(93.99 * GiB),
        allocated_bytes=int(92.48 * GiB),
        reserved_bytes=int(93.49 * GiB),
    )
    assert message == expected


def test_out_of_memory_names_size_capacity_free_op_and_source() -> None:
    device = SimulatedDevice("h100-95", non_torch_bytes=GiB // 2)
    with _tracker(device) as tracker:
        weights = _meta(93 * GiB)
        with pytest.raises(SimulatedOutOfMemoryError) as info:
            line = _next_line()
            torch.empty(1_138_753_536, dtype=BF16, device="meta").contiguous()
    error = info.value
    assert isinstance(error, torch.OutOfMemoryError) and isinstance(error, RuntimeError)
    assert str(error).startswith(
        "CUDA out of memory. Tried to allocate 2.12 GiB. GPU 0 has a total capacity of 95.00 GiB "
        "of which 1.50 GiB is free. Including non-PyTorch memory, this process has 93.50 GiB "
        "memory in use. Of the allocated memory 93.00 GiB is allocated by PyTorch, and 0 bytes "
        "is reserved by PyTorch but unallocated."
    )
    assert error.requested_bytes == allocation_size(1_138_753_536 * 2)
    assert error.nbytes == 1_138_753_536 * 2
    assert error.free_bytes == int(1.5 * GiB)
    assert error.capacity_bytes == 95 * GiB
    assert error.op == "aten.empty.memory_format"
    assert error.source is not None and error.source.line == line
    assert f"test_sim_allocator.py:{line}: torch.empty(1_138_753_536" in str(error)
    assert "simulated on h100-95: aten.empty.memory_format allocating 2.12 GiB" in str(error)
    record = error.to_dict()
    assert record["op"] == "aten.empty.memory_format" and record["message"] == error.torch_message
    # the refused allocation was never counted
    assert tracker.ledger.current_bytes == 93 * GiB
    del weights
    assert tracker.ledger.current_bytes == 0 and device.reserved_bytes == 0
    assert tracker.ledger.peak_bytes == 93 * GiB
    assert device.peak_reserved_bytes == 93 * GiB


def test_small_requests_report_the_segment_torch_would_ask_for() -> None:
    profile = DeviceProfile("tiny", 64 * MiB, non_torch_bytes=0)
    device = SimulatedDevice(profile)
    with _tracker(device) as tracker:
        big = _meta(63 * MiB)
        with pytest.raises(SimulatedOutOfMemoryError, match=r"Tried to allocate 2\.00 MiB"):
            _meta(100)
        with pytest.raises(SimulatedOutOfMemoryError, match=r"Tried to allocate 20\.00 MiB"):
            _meta(3 * MiB)
    assert tracker.ledger.current_bytes == 63 * MiB
    del big


def test_small_blocks_share_segments() -> None:
    device = SimulatedDevice(DeviceProfile("tiny", 64 * MiB, non_torch_bytes=0))
    with _tracker(device) as tracker:
        blocks = [_meta(1000) for _ in range(10)]
        assert tracker.ledger.current_bytes == 10 * 1024
        assert device.reserved_bytes == 2 * MiB
        mediums = [_meta(3 * MiB) for _ in range(3)]
        assert device.reserved_bytes == 2 * MiB + 20 * MiB
        large = _meta(11 * MiB)
        assert device.reserved_bytes == 2 * MiB + 20 * MiB + 12 * MiB
        assert device.free_bytes == 64 * MiB - 34 * MiB
    del blocks, mediums, large
    assert device.reserved_bytes == 0
    assert device.peak_reserved_bytes == 34 * MiB


def test_non_torch_bytes_reduce_free_memory() -> None:
    profile = DeviceProfile("tiny", 64 * MiB, non_torch_bytes=40 * MiB)
    with _tracker(SimulatedDevice(profile)), pytest.raises(SimulatedOutOfMemoryError):
        _meta(30 * MiB)
    with _tracker(SimulatedDevice(profile, non_torch_bytes=0)):
        ok = _meta(30 * MiB)
    assert ok.numel() == 30 * MiB


def test_growing_resize_needs_old_and_new_buffer_at_once() -> None:
    device = SimulatedDevice(DeviceProfile("tiny", 64 * MiB, non_torch_bytes=0))
    with _tracker(device) as tracker:
        t = _meta(30 * MiB)
        t.resize_(32 * MiB)  # 30 + 32 MiB fit together
        assert tracker.ledger.current_bytes == 32 * MiB
        with pytest.raises(SimulatedOutOfMemoryError, match=r"Tried to allocate 34\.00 MiB"):
            t.resize_(34 * MiB)  # 32 + 34 MiB do not
    assert tracker.ledger.current_bytes == 32 * MiB
    del t


def test_cpu_tensors_can_be_simulated_too() -> None:
    device = SimulatedDevice(DeviceProfile("tiny", 4 * MiB, non_torch_bytes=0))
    with _tracker(device, ("cpu",)), pytest.raises(torch.OutOfMemoryError):
        torch.ones(2 * MiB)  # 8 MiB of float32


def test_weights_registered_before_the_run_must_fit_too() -> None:
    device = SimulatedDevice("h100-95")
    tracker = _tracker(device)
    weights = [_meta(60 * GiB), _meta(40 * GiB)]
    with pytest.raises(SimulatedOutOfMemoryError, match=r"Tried to allocate 40\.00 GiB") as info:
        tracker.account_existing(weights, "model weights")
    assert info.value.op == "model weights"
    assert tracker.ledger.current_bytes == 60 * GiB


@pytest.mark.parametrize("non_torch", [95 * GiB, 200 * GiB, -1])
def test_non_torch_memory_must_leave_room_on_the_device(non_torch: int) -> None:
    with pytest.raises(HarnessError, match="non-torch memory must be at least 0 and less than"):
        SimulatedDevice("h100-95", non_torch_bytes=non_torch)
