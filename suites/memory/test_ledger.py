"""The ledger: one account of real and replayed allocations, checked against the device."""

from __future__ import annotations

import pytest
import torch

from harness.memory.devices import DeviceProfile
from harness.memory.ledger import Ledger
from harness.memory.sim_allocator import SimulatedDevice, SimulatedOutOfMemoryError
from harness.memory.sizes import MiB


def _ledger(total: int = 64 * MiB) -> Ledger:
    return Ledger(SimulatedDevice(DeviceProfile("test", total, non_torch_bytes=0)), top_k=3)


def test_real_allocations_are_accounted_with_peak_and_regions() -> None:
    ledger = _ledger()
    with ledger:
        with ledger.region("step 0") as stats:
            a = torch.empty(16 * MiB, dtype=torch.uint8, device="meta")
            b = torch.empty(12 * MiB, dtype=torch.uint8, device="meta")
            del a
        assert ledger.current_bytes == 12 * MiB
        assert ledger.peak_bytes == 28 * MiB and stats.peak_bytes == 28 * MiB
        assert stats.end_bytes == 12 * MiB
        assert [x.nbytes for x in ledger.peak_allocations()] == [16 * MiB, 12 * MiB]
        del b
    assert ledger.current_bytes == 0


def test_cpu_tensors_do_not_count() -> None:
    ledger = _ledger()
    with ledger:
        t = torch.empty(8 * MiB, dtype=torch.uint8)
    assert ledger.peak_bytes == 0
    del t


def test_oom_keeps_the_live_set_of_that_moment() -> None:
    ledger = _ledger(total=64 * MiB)  # blocks of 10 MiB and more get their own segment
    with ledger:
        keep = torch.empty(40 * MiB, dtype=torch.uint8, device="meta")
        with pytest.raises(SimulatedOutOfMemoryError) as exc:
            torch.empty(30 * MiB, dtype=torch.uint8, device="meta")
    assert exc.value.nbytes == 30 * MiB
    assert ledger.live_at_oom is not None
    assert [a.nbytes for a in ledger.live_at_oom] == [40 * MiB]
    assert ledger.current_bytes == 40 * MiB  # the refused allocation was never accounted
    del keep


def test_recording_and_replay_of_events_through_the_device() -> None:
    ledger = _ledger()
    with ledger:
        with ledger.recording() as recording:
            x = torch.empty(12 * MiB, dtype=torch.uint8, device="meta")
            del x
        assert [is_alloc for is_alloc, _, _ in recording.events] == [True, False]
        allocation = recording.events[0][2]
        assert allocation is not None
        token = ledger.allocate(allocation)  # a replayed allocation goes through the device too
        assert ledger.current_bytes == 12 * MiB and ledger.device.allocated_bytes == 12 * MiB
        ledger.free(token)
        assert ledger.current_bytes == 0 and ledger.device.allocated_bytes == 0
