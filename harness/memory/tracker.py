"""Account the live storage bytes of tensors created under a ``TorchDispatchMode``.

Public API (stable; other modules build on it):

- :class:`MemoryTracker` -- ``with MemoryTracker() as tracker: ...`` accounts every storage that an
  aten op creates for a tracked device (``cpu`` and ``meta`` by default, ``cuda`` on request):

  * a view (``t.T``, ``t[1:]``, ``t.view(...)``) allocates nothing;
  * ``.contiguous()`` of a permuted tensor, ``.clone()``, factory ops allocate their output;
  * an ``out=`` argument or ``resize_`` that grows a storage allocates the new size (as torch does,
    the old buffer is released after the new one exists, so both count at that moment);
  * a storage is freed when it dies (a weak reference with a callback on the storage object, which
    torch keeps alive exactly as long as the C++ storage), also after the ``with`` block ended.

  It keeps ``current_bytes``, ``peak_bytes``, a ``timeline`` of :class:`TimelinePoint`
  ``(seq, live_bytes, region)`` (one point per allocation or free), named regions
  (``with tracker.region("profile_run"): ...`` -> :class:`RegionStats`), and the largest
  allocations live at the peak (:meth:`MemoryTracker.peak_allocations`), each an
  :class:`Allocation` with op name, size, shape, dtype, device and the :class:`SourceLine` of the
  first Python frame outside torch and this tracker that caused it.
- ``on_alloc(allocation)`` is called before an allocation counts; raising refuses it (the simulated
  allocator in :mod:`harness.memory.sim_allocator` raises its out-of-memory error there). The
  refused allocation is not accounted and the tracker stays consistent. ``on_free(allocation)`` is
  called after a free was accounted.
- :meth:`MemoryTracker.account_existing` registers tensors created before the tracker (model
  weights) as a baseline that counts towards ``current_bytes`` and the peak.
- :meth:`MemoryTracker.reset_peak` starts a new peak at the current live bytes (like
  ``torch.cuda.reset_peak_memory_stats``).

Cost: one Python call per aten op plus, per allocation, a storage lookup, a weak reference and a
short frame walk (``sys._getframe``; the file decision is cached per code object). Nothing depends
on tensor sizes, so large ops pay close to nothing (``scripts/bench_tracker.py`` measures it).
"""

from __future__ import annotations

import contextlib
import heapq
import linecache
import os
import sys
import weakref
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from types import CodeType, FrameType, TracebackType
from typing import Any, NamedTuple, cast

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.memory.sizes import format_size

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_INTERNAL_FILES: set[str] = {
    os.path.abspath(__file__),
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "sim_allocator.py"),
    contextlib.__file__,
}
_internal_code: dict[CodeType, bool] = {}
_getframe: Callable[[int], FrameType] = sys._getframe  # pyright: ignore[reportPrivateUsage]


@dataclass(frozen=True, slots=True)
class SourceLine:
    """A Python source position: ``path:line`` plus the text of that line (read lazily)."""

    path: str
    line: int

    @property
    def text(self) -> str:
        """The stripped source text of the line, or ``""`` when the file cannot be read."""
        return linecache.getline(self.path, self.line).strip()

    def __str__(self) -> str:
        return f"{_display_path(self.path)}:{self.line}"


@dataclass(slots=True)
class Allocation:
    """One storage allocated under the tracker (or registered with ``account_existing``)."""

    seq: int
    """Event number of the allocation in the tracker's timeline."""
    op: str
    """The aten overload that allocated, e.g. ``aten.clone.default``, or the baseline label."""
    nbytes: int
    """Bytes of the storage (the new size for a growing resize)."""
    shape: tuple[int, ...]
    """Shape of the first output tensor that uses the storage."""
    dtype: torch.dtype
    device: str
    """Device type: ``cpu``, ``meta`` or ``cuda``."""
    source: SourceLine | None
    """First frame outside torch and the tracker; ``None`` when there is no such frame."""
    region: str | None
    """Innermost region active when the storage was allocated."""
    replaces: int = 0
    """Bytes of the storage's previous buffer when this allocation is a resize, else 0."""

    def describe(self) -> str:
        """One line: size, op, shape/dtype/device and source."""
        shape = "x".join(str(d) for d in self.shape) or "scalar"
        where = f" at {self.source}" if self.source is not None else ""
        dtype = str(self.dtype).removeprefix("torch.")
        return f"{format_size(self.nbytes):>12}  {self.op} [{shape} {dtype} {self.device}]{where}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: op, nbytes, shape, dtype, device, source, line_text, region, seq."""
        return {
            "op": self.op,
            "nbytes": self.nbytes,
            "shape": list(self.shape),
            "dtype": str(self.dtype).removeprefix("torch."),
            "device": self.device,
            "source": None if self.source is None else str(self.source),
            "line_text": None if self.source is None else self.source.text,
            "region": self.region,
            "seq": self.seq,
        }


class TimelinePoint(NamedTuple):
    """Live bytes right after event ``seq`` (an allocation or a free) inside ``region``."""

    seq: int
    live_bytes: int
    region: str | None


@dataclass(slots=True)
class RegionStats:
    """Live bytes at the start, peak inside, and at the end of one ``tracker.region(name)``."""

    name: str
    start_seq: int
    start_bytes: int
    peak_bytes: int
    end_seq: int | None = None
    end_bytes: int | None = None

    @property
    def peak_increase(self) -> int:
        """Bytes the region's peak rose above the live bytes at its start."""
        return self.peak_bytes - self.start_bytes


class _StorageRef(weakref.ref[torch.UntypedStorage]):
    """A weak reference to a tracked storage that carries its key and current allocation."""

    __slots__ = ("allocation", "key")
    key: int
    allocation: Allocation


@dataclass(slots=True)
class _OpInfo:
    name: str
    mutable: bool
    aliased_returns: tuple[bool, ...]
    first_return_aliased: bool


_op_info: dict[Any, _OpInfo] = {}


def _info(func: Any) -> _OpInfo:
    info = _op_info.get(func)
    if info is None:
        schema = func._schema
        aliased = tuple(r.alias_info is not None for r in schema.returns)
        info = _OpInfo(
            name=str(func),
            mutable=bool(schema.is_mutable),
            aliased_returns=aliased,
            first_return_aliased=bool(aliased and aliased[0]),
        )
        _op_info[func] = info
    return info


@dataclass(eq=False)
class _State:
    live: dict[int, _StorageRef] = field(default_factory=dict[int, _StorageRef])
    current: int = 0
    peak: int = 0
    peak_seq: int = 0
    peak_region: str | None = None
    at_peak: bool = True
    peak_snapshot: list[Allocation] = field(default_factory=list[Allocation])
    seq: int = 0
    total_allocated: int = 0
    num_allocations: int = 0


class MemoryTracker(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Accounts live storage bytes of tensors that aten ops create while the mode is active.

    Args:
        devices: device types to account (``"cpu"``, ``"meta"``, ``"cuda"``).
        top_k: how many allocations live at the peak are kept.
        on_alloc: called with each :class:`Allocation` before it counts; raise to refuse it.
        on_free: called with each :class:`Allocation` after its free was accounted.
        record_timeline: keep one :class:`TimelinePoint` per event (turn off for very long runs).
    """

    def __init__(
        self,
        *,
        devices: Iterable[str] = ("cpu", "meta"),
        top_k: int = 10,
        on_alloc: Callable[[Allocation], None] | None = None,
        on_free: Callable[[Allocation], None] | None = None,
        record_timeline: bool = True,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # pyright: ignore[reportUnknownMemberType]
        self.devices = frozenset(devices)
        self.top_k = top_k
        self.on_alloc = on_alloc
        self.on_free = on_free
        self.record_timeline = record_timeline
        self.timeline: list[TimelinePoint] = []
        self.regions: list[RegionStats] = []
        self._active: list[RegionStats] = []
        self._s = _State()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """Keep ``__torch_dispatch__`` unwrapped by ``torch._disable_dynamo``.

        TorchDispatchMode wraps subclasses' ``__torch_dispatch__`` so that dynamo skips it; the
        wrapper disables dynamo recursively for every Python frame below it, which made each
        tracked op about 1.6x slower (scripts/bench_tracker.py). The tracker is for eager runs;
        it is not meant to be active while ``torch.compile`` traces.
        """
        return False

    def __enter__(self) -> MemoryTracker:
        super().__enter__()  # type: ignore[no-untyped-call]  # pyright: ignore[reportUnknownMemberType]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        super().__exit__(exc_type, exc, traceback)  # type: ignore[no-untyped-call]  # pyright: ignore[reportUnknownMemberType]

    # -- results -----------------------------------------------------------------------------

    @property
    def current_bytes(self) -> int:
        """Bytes of all tracked storages alive now."""
        return self._s.current

    @property
    def peak_bytes(self) -> int:
        """Highest ``current_bytes`` since creation or the last :meth:`reset_peak`."""
        return self._s.peak

    @property
    def peak_seq(self) -> int:
        """Timeline event at which the peak was reached."""
        return self._s.peak_seq

    @property
    def peak_region(self) -> str | None:
        """Innermost region active when the peak was reached."""
        return self._s.peak_region

    @property
    def num_allocations(self) -> int:
        """Allocations accounted so far (baseline registrations included)."""
        return self._s.num_allocations

    @property
    def total_allocated_bytes(self) -> int:
        """Sum of all allocation sizes so far (never decreases)."""
        return self._s.total_allocated

    def live_allocations(self) -> list[Allocation]:
        """All tracked storages alive now, largest first."""
        return sorted(_live_allocations(self._s), key=_by_size, reverse=True)

    def peak_allocations(self, k: int | None = None) -> list[Allocation]:
        """The ``k`` (default ``top_k``) largest allocations that were live at the peak."""
        s = self._s
        k = self.top_k if k is None else min(k, self.top_k)
        if s.at_peak:
            return heapq.nlargest(k, _live_allocations(s), key=_by_size)
        return s.peak_snapshot[:k]

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
            f"peak {format_size(self.peak_bytes)} ({self.peak_bytes} bytes) at event "
            f"{self.peak_seq}{where}; live now {format_size(self.current_bytes)}",
        ]
        top = self.peak_allocations(k)
        if top:
            lines.append(f"largest allocations live at the peak (top {len(top)}):")
        for allocation in top:
            lines.append("  " + allocation.describe())
            if allocation.source is not None and allocation.source.text:
                lines.append(f"  {'':>12}    {allocation.source.text}")
        return "\n".join(lines)

    # -- control -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def region(self, name: str) -> Generator[RegionStats, None, None]:
        """Name the events inside the block; yields the region's :class:`RegionStats`."""
        s = self._s
        stats = RegionStats(name, start_seq=s.seq, start_bytes=s.current, peak_bytes=s.current)
        self.regions.append(stats)
        self._active.append(stats)
        try:
            yield stats
        finally:
            self._active.remove(stats)
            stats.end_seq = s.seq
            stats.end_bytes = s.current

    def reset_peak(self) -> None:
        """Start a new peak at the current live bytes."""
        s = self._s
        s.peak = s.current
        s.peak_seq = s.seq
        s.peak_region = self._active[-1].name if self._active else None
        s.at_peak = True
        s.peak_snapshot = []

    def account_existing(self, tensors: Iterable[torch.Tensor], label: str) -> int:
        """Count storages of tensors created before the tracker (e.g. weights) as ``label``.

        Storages already tracked and shared storages are counted once. Returns the bytes added.
        """
        source = _caller_source(_getframe(1))
        added = 0
        for tensor in tensors:
            storage = _storage(tensor)
            if storage is None or _key(storage) in self._s.live:
                continue
            nbytes = storage.nbytes()
            added += nbytes
            self._add(storage, label, nbytes, tensor, source, replaces=0)
        return added

    # -- dispatch ----------------------------------------------------------------------------

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        __tracebackhide__ = True  # pytest: show the user's frame, not the tracker's
        info = _op_info.get(func) or _info(func)
        if info.mutable:  # in-place and out= ops may grow a storage: compare sizes
            kwargs = kwargs or {}
            before = _input_sizes(args, kwargs)
            mutated: Any = func(*args, **kwargs)
            self._observe_outputs(mutated, info, args, before)
            return mutated
        result: Any = func(*args, **kwargs) if kwargs else func(*args)
        out: object = result
        if type(out) is torch.Tensor:  # the common case, kept short
            if not info.first_return_aliased or not _aliases_an_input(out, args):
                self._observe_new(out, info, args)
        elif type(out) in (tuple, list):
            self._observe_outputs(out, info, args, None)
        return result

    def _observe_new(self, tensor: torch.Tensor, info: _OpInfo, args: tuple[Any, ...]) -> None:
        """Output of a non-mutating op that does not alias its inputs: new unless seen."""
        __tracebackhide__ = True
        if tensor.device.type not in self.devices:
            return
        storage = _storage(tensor)
        if storage is None or _key(storage) in self._s.live:
            return
        nbytes = storage.nbytes()
        if nbytes == 0 or any(arg is tensor for arg in args):
            return
        self._add(storage, info.name, nbytes, tensor, None, replaces=0)

    def _observe_outputs(
        self,
        out: object,
        info: _OpInfo,
        args: tuple[Any, ...],
        before: dict[int, int] | None,
    ) -> None:
        __tracebackhide__ = True
        outputs = [out] if isinstance(out, torch.Tensor) else _leaves(cast("Iterable[Any]", out))
        aliased = info.aliased_returns
        for i, item in enumerate(outputs):
            if not isinstance(item, torch.Tensor):
                continue
            if before is not None:
                self._observe_mutated(item, info, before)
            elif not (
                aliased[i] if i < len(aliased) else bool(aliased and aliased[-1])
            ) or not _aliases_an_input(item, args):
                self._observe_new(item, info, args)

    def _observe_mutated(self, tensor: torch.Tensor, info: _OpInfo, before: dict[int, int]) -> None:
        """Output of an in-place/out= op: an allocation only if a storage grew or is new."""
        __tracebackhide__ = True
        if tensor.device.type not in self.devices:
            return
        storage = _storage(tensor)
        if storage is None:
            return
        key = _key(storage)
        nbytes = storage.nbytes()
        known = self._s.live.get(key)
        if known is not None:
            old = known.allocation.nbytes
            if nbytes > old:  # out= or resize_ grew a tracked storage: a new buffer replaces it
                self._grow(known, storage, info.name, nbytes, tensor, old)
            return
        if key in before:
            if nbytes > before[key]:  # grew a storage we did not track: the new buffer is ours
                self._add(storage, info.name, nbytes, tensor, None, replaces=0)
            return
        if nbytes:
            self._add(storage, info.name, nbytes, tensor, None, replaces=0)

    # -- bookkeeping -------------------------------------------------------------------------

    def _make(
        self,
        op: str,
        nbytes: int,
        tensor: torch.Tensor,
        source: SourceLine | None,
        replaces: int,
    ) -> Allocation:
        if source is None:
            source = _caller_source(_getframe(1))
        return Allocation(
            self._s.seq + 1,
            op,
            nbytes,
            tensor.shape,  # torch.Size is a tuple
            tensor.dtype,
            tensor.device.type,
            source,
            self._active[-1].name if self._active else None,
            replaces,
        )

    def _add(
        self,
        storage: torch.UntypedStorage,
        op: str,
        nbytes: int,
        tensor: torch.Tensor,
        source: SourceLine | None,
        replaces: int,
    ) -> None:
        __tracebackhide__ = True
        allocation = self._make(op, nbytes, tensor, source, replaces)
        if self.on_alloc is not None:
            self.on_alloc(allocation)
        ref = _StorageRef(storage, self._freed)
        ref.key = _key(storage)
        ref.allocation = allocation
        self._s.live[ref.key] = ref
        self._count_alloc(allocation)

    def _grow(
        self,
        known: _StorageRef,
        storage: torch.UntypedStorage,
        op: str,
        nbytes: int,
        tensor: torch.Tensor,
        old: int,
    ) -> None:
        __tracebackhide__ = True
        allocation = self._make(op, nbytes, tensor, None, replaces=old)
        if self.on_alloc is not None:
            self.on_alloc(allocation)
        previous = known.allocation
        known.allocation = allocation
        self._count_alloc(allocation)  # old and new buffers coexist for a moment, as in torch
        self._count_free(previous)

    def _count_alloc(self, allocation: Allocation) -> None:
        s = self._s
        s.seq = allocation.seq
        s.current += allocation.nbytes
        s.total_allocated += allocation.nbytes
        s.num_allocations += 1
        if s.current > s.peak:
            s.peak = s.current
            s.peak_seq = s.seq
            s.peak_region = allocation.region
            s.at_peak = True
        for stats in self._active:
            if s.current > stats.peak_bytes:
                stats.peak_bytes = s.current
        if self.record_timeline:
            self.timeline.append(TimelinePoint(s.seq, s.current, allocation.region))

    def _count_free(self, allocation: Allocation) -> None:
        """Account a free; ``allocation`` is no longer listed in ``live``."""
        s = self._s
        if s.at_peak:  # leaving the peak: remember what was live there
            candidates = _live_allocations(s)
            candidates.append(allocation)
            s.peak_snapshot = heapq.nlargest(self.top_k, candidates, key=_by_size)
            s.at_peak = False
        s.seq += 1
        s.current -= allocation.nbytes
        if self.record_timeline:
            region = self._active[-1].name if self._active else None
            self.timeline.append(TimelinePoint(s.seq, s.current, region))
        if self.on_free is not None:
            self.on_free(allocation)

    def _freed(self, ref: weakref.ref[torch.UntypedStorage]) -> None:
        assert isinstance(ref, _StorageRef)
        live = self._s.live
        if live.get(ref.key) is not ref:
            return
        del live[ref.key]
        self._count_free(ref.allocation)


def _live_allocations(state: _State) -> list[Allocation]:
    # list() copies the values without allocating Python objects, so a garbage collection (whose
    # weakref callbacks delete from ``live``) cannot run while the dict is being iterated
    return [ref.allocation for ref in list(state.live.values())]


def _key(storage: torch.UntypedStorage) -> int:
    """Identity of the C++ storage (stable while it lives; meta storages have no data pointer)."""
    key: int = storage._cdata  # pyright: ignore[reportPrivateUsage]
    return key


def _by_size(allocation: Allocation) -> int:
    return allocation.nbytes


def _storage(tensor: torch.Tensor) -> torch.UntypedStorage | None:
    if type(tensor) is not torch.Tensor and not isinstance(tensor, torch.nn.Parameter):
        return None
    try:
        return tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less layouts
        return None


def _leaves(values: Iterable[Any]) -> Iterator[Any]:
    for value in values:
        if isinstance(value, (tuple, list)):
            yield from _leaves(value)  # pyright: ignore[reportUnknownArgumentType]
        else:
            yield value


def _tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[torch.Tensor]:
    for value in _leaves((args, tuple(kwargs.values()))):
        if isinstance(value, torch.Tensor):
            yield value


def _aliases_an_input(tensor: torch.Tensor, args: tuple[Any, ...]) -> bool:
    """Whether ``tensor`` shares a storage with a tensor argument.

    A schema's alias annotation (``Tensor(a)``) says an op *may* return its input: under
    ``torch.inference_mode()`` ``aten.contiguous`` of a permuted tensor, or ``aten.to`` to another
    device, return a brand-new storage all the same, and that is an allocation.
    """
    storage = _storage(tensor)
    if storage is None:
        return True
    key = _key(storage)
    first = args[0] if args else None
    if type(first) is torch.Tensor and _key(first.untyped_storage()) == key:
        return True  # the usual view of the first argument, decided without walking the rest
    for arg in _leaves(args):
        if isinstance(arg, torch.Tensor):
            arg_storage = _storage(arg)
            if arg_storage is not None and _key(arg_storage) == key:
                return True
    return False


def _input_sizes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for tensor in _tensors(args, kwargs):
        storage = _storage(tensor)
        if storage is not None:
            sizes[_key(storage)] = storage.nbytes()
    return sizes


def _is_internal(code: CodeType) -> bool:
    path = code.co_filename
    internal = path.startswith(_TORCH_DIR) or os.path.abspath(path) in _INTERNAL_FILES
    _internal_code[code] = internal
    return internal


def _caller_source(frame: FrameType | None) -> SourceLine | None:
    internal = _internal_code
    while frame is not None:
        code = frame.f_code
        if not (internal[code] if code in internal else _is_internal(code)):
            return SourceLine(code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def _display_path(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative
