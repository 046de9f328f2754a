"""One account of memory: live bytes, the peak, regions and what was live, by source line.

Event sources (the :class:`~harness.memory.tracker.MemoryTracker`, the layer replay of
:mod:`harness.simulation.replay`) :meth:`Ledger.allocate` (which returns a token) and
:meth:`Ledger.free`. Only the ledger counts: live bytes, the peak, named regions, an optional
timeline, recordings, and live bytes by op and source line (:meth:`Ledger.sites_at_peak`).
A :class:`CapacityPolicy` (e.g. :class:`~harness.memory.sim_allocator.SimulatedDevice`) sizes each
request and may refuse it. ``Ledger.lock`` (reentrant: a garbage collection may free a storage
during an allocation) serialises events from several threads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from harness.memory.allocation import Allocation
from harness.memory.sizes import format_size


class CapacityPolicy(Protocol):
    """What a device adds to the ledger: its block sizes and a check that may refuse."""

    def block_bytes(self, nbytes: int) -> int:
        """Bytes a request of ``nbytes`` takes on the device (what the ledger counts)."""
        ...

    def allocate(self, allocation: Allocation, allocated_bytes: int) -> None:
        """Reserve room for ``allocation`` or raise; ``allocated_bytes`` are live before it."""
        ...

    def free(self, allocation: Allocation) -> None:
        """Release what :meth:`allocate` reserved for ``allocation``."""
        ...


@dataclass(slots=True)
class RegionStats:
    """Live bytes at the start, the peak inside and at the end of one named region."""

    name: str
    start_bytes: int
    peak_bytes: int
    end_bytes: int | None = None
    """``None`` while the region is open."""


class TimelinePoint(NamedTuple):
    """Live bytes right after event ``seq`` (an allocation or a free) inside ``region``."""

    seq: int
    live_bytes: int
    region: str | None


class LedgerEvent(NamedTuple):
    """One event of a :class:`Recording`."""

    is_alloc: bool
    position: int
    """An allocation's own position in the recording; for a free, the position of the allocation
    it frees (``-1``: allocated before the recording started)."""
    allocation: Allocation | None
    """The allocation (``None`` for a free)."""
    live_bytes: int
    """Live bytes of the whole ledger right after the event."""


@dataclass(eq=False)
class Recording:
    """The events inside one ``with ledger.recording()`` block, in order."""

    events: list[LedgerEvent] = field(default_factory=list[LedgerEvent])
    live: dict[int, int] = field(default_factory=dict[int, int])
    """Ledger token -> position of its allocation, for allocations made inside and still live."""
    external_free: bool = False
    """Whether something allocated before the recording was freed inside it."""
    refused_at: int | None = None
    """Number of events recorded when the capacity policy refused an allocation (``None``: it
    never did); events after it belong to the unwinding."""


@dataclass(frozen=True, slots=True)
class AllocationSite:
    """Live allocations grouped by op and source line: how many, how large."""

    op: str
    source: str | None
    line_text: str
    count: int
    nbytes: int
    """Bytes of all of them together, as the ledger counts them."""
    largest: int
    sites: int = 1
    """How many sites this row stands for (more than 1 only for the ``other`` row)."""

    def describe(self) -> str:
        """One line: count, size, total, op and source."""
        if self.sites > 1:
            where = f" ({self.sites} sites)"
        else:
            where = f" at {self.source}" if self.source else ""
        if self.count * self.largest == self.nbytes:  # all the same size
            sizes = f"{self.count:>4} x {format_size(self.largest):>10}"
        else:
            sizes = f"{self.count:>4} up to {format_size(self.largest):>10}"
        return f"{sizes} = {format_size(self.nbytes):>10}  {self.op}{where}"


OTHER_SITES = "other"
"""``op`` of the row that sums every site beyond the first ``k``."""


def group_by_site(entries: Iterable[tuple[Allocation, int]], k: int) -> list[AllocationSite]:
    """``(allocation, counted bytes)`` pairs grouped by site, largest first: the ``k`` largest
    sites, then one ``other`` row for the rest, so that the rows always add up to every byte."""
    groups: dict[tuple[str, str | None], list[tuple[Allocation, int]]] = {}
    for allocation, size in entries:
        groups.setdefault(allocation.site, []).append((allocation, size))
    sites = sorted(
        (
            AllocationSite(
                op=op,
                source=source,
                line_text="" if members[0][0].source is None else members[0][0].source.text,
                count=len(members),
                nbytes=sum(size for _, size in members),
                largest=max(size for _, size in members),
            )
            for (op, source), members in groups.items()
        ),
        key=lambda site: site.nbytes,
        reverse=True,
    )
    top, rest = sites[:k], sites[k:]
    if rest:
        top.append(
            AllocationSite(
                op=OTHER_SITES,
                source=None,
                line_text="",
                count=sum(s.count for s in rest),
                nbytes=sum(s.nbytes for s in rest),
                largest=max(s.largest for s in rest),
                sites=len(rest),
            )
        )
    return top


class Ledger:
    """The one account of allocations and frees (see the module docstring).

    ``capacity`` sizes and may refuse each allocation (``None``: storage bytes, no refusal);
    ``record_timeline`` keeps one :class:`TimelinePoint` per event.
    """

    def __init__(
        self, capacity: CapacityPolicy | None = None, *, record_timeline: bool = False
    ) -> None:
        self.capacity = capacity
        self.record_timeline = record_timeline
        self.lock = threading.RLock()
        """Held while an event is accounted; event sources hold it around their bookkeeping."""
        self.timeline: list[TimelinePoint] = []
        self.regions: list[RegionStats] = []
        """Every region entered so far, in order."""
        self.refusal: Exception | None = None
        """The error the capacity policy raised last (seen even when the thread that made the
        allocation swallowed it)."""
        self.num_allocations = 0
        self._live: dict[int, tuple[Allocation, int]] = {}
        self._next_token = 0
        self._seq = 0
        self._current = 0
        self._peak = 0
        self._peak_region: str | None = None
        self._peak_live: list[tuple[Allocation, int]] | None = None
        """What was live at the peak; ``None`` while the peak is now."""
        self._live_at_refusal: list[tuple[Allocation, int]] = []
        self._active: list[RegionStats] = []
        self._recordings: list[Recording] = []

    @property
    def current_bytes(self) -> int:
        """Bytes of everything live now."""
        return self._current

    @property
    def peak_bytes(self) -> int:
        """Highest ``current_bytes`` since creation or the last :meth:`reset_peak`."""
        return self._peak

    @property
    def peak_region(self) -> str | None:
        """Innermost region active when the peak was reached."""
        return self._peak_region

    @property
    def current_region(self) -> str | None:
        """Innermost region active now."""
        active = self._active
        return active[-1].name if active else None

    def live_allocations(self) -> list[Allocation]:
        """Everything live now, largest first."""
        return [a for a, _ in sorted(self._live.values(), key=_by_size, reverse=True)]

    def peak_allocations(self, k: int | None = None) -> list[Allocation]:
        """The ``k`` (default: all) largest allocations live at the peak, largest first."""
        entries = sorted(self._at_peak(), key=_by_size, reverse=True)
        return [a for a, _ in entries[:k]]

    def sites_at_peak(self, k: int) -> list[AllocationSite]:
        """Live bytes at the peak by site: ``k`` rows and an ``other`` row; they sum to the peak."""
        return group_by_site(self._at_peak(), k)

    def sites_at_refusal(self, k: int) -> list[AllocationSite]:
        """Live bytes by site at the last :attr:`refusal` (else empty)."""
        return group_by_site(self._live_at_refusal, k)

    def region_stats(self, name: str) -> RegionStats:
        """The last region called ``name``; ``KeyError`` if there is none."""
        for stats in reversed(self.regions):
            if stats.name == name:
                return stats
        raise KeyError(name)

    def summary(self, k: int = 5) -> str:
        """Peak, where it happened, and the ``k`` largest allocations live at the peak."""
        where = f" in region {self.peak_region!r}" if self.peak_region else ""
        lines = [
            f"peak {format_size(self.peak_bytes)} ({self.peak_bytes} bytes){where}; "
            f"live now {format_size(self.current_bytes)}"
        ]
        top = self.peak_allocations(k)
        if top:
            lines.append(f"largest allocations live at the peak (top {len(top)}):")
        for allocation in top:
            lines.append("  " + allocation.describe())
            if allocation.source is not None and allocation.source.text:
                lines.append(f"  {'':>12}    {allocation.source.text}")
        return "\n".join(lines)

    @contextlib.contextmanager
    def region(self, name: str) -> Generator[RegionStats, None, None]:
        """Name the events inside the block; yields the region's :class:`RegionStats`."""
        with self.lock:
            stats = RegionStats(name, self._current, self._current)
            self.regions.append(stats)
            self._active.append(stats)
        try:
            yield stats
        finally:
            with self.lock:
                self._active.remove(stats)
                stats.end_bytes = self._current

    def reset_peak(self) -> None:
        """Start a new peak at the current live bytes (``torch.cuda.reset_peak_memory_stats``)."""
        with self.lock:
            self._peak = self._current
            self._peak_region = self.current_region
            self._peak_live = None

    @contextlib.contextmanager
    def recording(self) -> Generator[Recording, None, None]:
        """Record the events inside the block (for layer replay and the plot's failing step)."""
        recording = Recording()
        with self.lock:
            self._recordings.append(recording)
        try:
            yield recording
        finally:
            with self.lock:
                self._recordings.remove(recording)

    def allocate(self, allocation: Allocation) -> int:
        """Count ``allocation`` (the capacity policy may refuse it: then it raises and nothing
        counts); returns the token to :meth:`free` it with."""
        __tracebackhide__ = True  # pytest: show the allocating frame, not the ledger's
        with self.lock:
            capacity = self.capacity
            if capacity is None:
                size = allocation.nbytes
            else:
                size = capacity.block_bytes(allocation.nbytes)
                try:
                    capacity.allocate(allocation, self._current)
                except Exception as exc:
                    self.refusal = exc
                    self._live_at_refusal = list(self._live.values())
                    for recording in self._recordings:
                        recording.refused_at = len(recording.events)
                    raise
            token = self._next_token
            self._next_token += 1
            self._live[token] = (allocation, size)
            self._current += size
            self._seq += 1
            self.num_allocations += 1
            current = self._current
            if current > self._peak:
                self._peak = current
                self._peak_region = self.current_region
                self._peak_live = None
            for stats in self._active:
                if current > stats.peak_bytes:
                    stats.peak_bytes = current
            if self.record_timeline:
                self.timeline.append(TimelinePoint(self._seq, current, self.current_region))
            for recording in self._recordings:
                recording.live[token] = len(recording.events)
                recording.events.append(
                    LedgerEvent(True, len(recording.events), allocation, current)
                )
            return token

    def free(self, token: int) -> None:
        """Release the allocation :meth:`allocate` returned ``token`` for."""
        with self.lock:
            if self._peak_live is None:  # leaving the peak: keep what was live there
                self._peak_live = list(self._live.values())
            allocation, size = self._live.pop(token)
            if self.capacity is not None:
                self.capacity.free(allocation)
            self._current -= size
            self._seq += 1
            current = self._current
            if self.record_timeline:
                self.timeline.append(TimelinePoint(self._seq, current, self.current_region))
            for recording in self._recordings:
                index = recording.live.pop(token, -1)
                recording.external_free |= index < 0
                recording.events.append(LedgerEvent(False, index, None, current))

    def _at_peak(self) -> list[tuple[Allocation, int]]:
        if self._peak_live is not None:
            return self._peak_live
        return list(self._live.values())


def _by_size(entry: tuple[Allocation, int]) -> int:
    return entry[1]
