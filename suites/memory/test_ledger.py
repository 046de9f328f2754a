"""The ledger: the one account of allocations, with a device as a capacity policy on top."""

from __future__ import annotations

import pytest
import torch

from harness.memory.allocation import Allocation, SourceLine
from harness.memory.devices import DeviceProfile
from harness.memory.ledger import OTHER_SITES, Ledger
from harness.memory.sim_allocator import SimulatedDevice, SimulatedOutOfMemoryError
from harness.memory.sizes import MiB
from harness.memory.tracker import MemoryTracker


def _device(total: int = 64 * MiB) -> SimulatedDevice:
    return SimulatedDevice(DeviceProfile("test", total, non_torch_bytes=0))


def _tracked(ledger: Ledger) -> MemoryTracker:
    return MemoryTracker(ledger, devices=("meta",), all_threads=False)


def _allocation(nbytes: int, line: int = 1, op: str = "aten.empty.memory_format") -> Allocation:
    return Allocation(
        op, nbytes, (nbytes,), torch.uint8, "meta", SourceLine("model.py", line), region=None
    )


def test_real_allocations_are_accounted_with_peak_and_regions() -> None:
    ledger = Ledger(capacity=_device())
    with _tracked(ledger):
        with ledger.region("step 0") as stats:
            a = torch.empty(16 * MiB, dtype=torch.uint8, device="meta")
            b = torch.empty(12 * MiB, dtype=torch.uint8, device="meta")
            del a
        assert ledger.current_bytes == 12 * MiB
        assert ledger.peak_bytes == 28 * MiB and stats.peak_bytes == 28 * MiB
        assert stats.end_bytes == 12 * MiB
        assert [x.nbytes for x in ledger.peak_allocations()] == [16 * MiB, 12 * MiB]
        assert ledger.peak_region == "step 0"
        del b
    assert ledger.current_bytes == 0


def test_without_a_policy_storage_bytes_count_and_with_one_its_blocks() -> None:
    plain, device = Ledger(), Ledger(capacity=_device())
    for ledger in (plain, device):
        ledger.allocate(_allocation(100))
    assert plain.current_bytes == 100
    assert device.current_bytes == 512  # torch's smallest block


def test_oom_keeps_the_live_set_of_that_moment() -> None:
    ledger = Ledger(capacity=_device(64 * MiB))  # blocks of 10 MiB and more get their own segment
    with _tracked(ledger):
        keep = torch.empty(40 * MiB, dtype=torch.uint8, device="meta")
        with pytest.raises(SimulatedOutOfMemoryError) as exc:
            torch.empty(30 * MiB, dtype=torch.uint8, device="meta")
    assert exc.value.nbytes == 30 * MiB
    assert exc.value.allocated_bytes == 40 * MiB  # the ledger's count, in the torch message
    assert ledger.refusal is exc.value
    assert [(s.nbytes, s.count) for s in ledger.sites_at_refusal(5)] == [(40 * MiB, 1)]
    assert ledger.current_bytes == 40 * MiB  # the refused allocation was never accounted
    del keep


def test_sites_at_the_peak_add_up_to_the_peak_with_an_other_row() -> None:
    ledger = Ledger(capacity=_device())
    tokens = [ledger.allocate(_allocation(1000 * (i + 1), line=i)) for i in range(6)]
    tokens.append(ledger.allocate(_allocation(3000, line=5)))  # a second one at line 5
    peak = ledger.peak_bytes
    ledger.free(tokens[0])  # after the peak: not seen in the peak's sites
    sites = ledger.sites_at_peak(3)
    assert sum(site.nbytes for site in sites) == peak
    assert [s.source for s in sites[:3]] == ["model.py:5", "model.py:4", "model.py:3"]
    assert (sites[0].count, sites[0].largest) == (2, 6144)  # 6000 and 3000 in 512-byte blocks
    other = sites[-1]
    assert (other.op, other.sites, other.count) == (OTHER_SITES, 3, 3)
    assert "(3 sites)" in other.describe()
    assert ledger.sites_at_peak(10)[-1].op != OTHER_SITES  # nothing left over: no other row


def test_recording_and_replay_of_events_through_the_device() -> None:
    ledger = Ledger(capacity=_device())
    with _tracked(ledger):
        with ledger.recording() as recording:
            x = torch.empty(12 * MiB, dtype=torch.uint8, device="meta")
            del x
        assert [e.is_alloc for e in recording.events] == [True, False]
        assert [e.live_bytes for e in recording.events] == [12 * MiB, 0]
        allocation = recording.events[0].allocation
        assert allocation is not None
        token = ledger.allocate(allocation)  # a replayed allocation goes through the device too
        assert ledger.current_bytes == 12 * MiB
        assert ledger.capacity is not None and _device_reserved(ledger) == 12 * MiB
        ledger.free(token)
        assert ledger.current_bytes == 0 and _device_reserved(ledger) == 0


def test_a_recording_knows_where_the_device_refused() -> None:
    ledger = Ledger(capacity=_device(64 * MiB))
    kept = ledger.allocate(_allocation(40 * MiB))
    with ledger.recording() as recording:
        ledger.free(kept)  # allocated before the recording: an external free
        ledger.allocate(_allocation(40 * MiB))
        with pytest.raises(SimulatedOutOfMemoryError):
            ledger.allocate(_allocation(30 * MiB))
    assert recording.external_free and recording.refused_at == 2
    assert recording.events[0].position == -1


def _device_reserved(ledger: Ledger) -> int:
    assert isinstance(ledger.capacity, SimulatedDevice)
    return ledger.capacity.reserved_bytes
