"""One account of a simulated device's memory, and the replay of identical decoder layers.

Accounting. A :class:`Ledger` receives every allocation and free: the real ones from the
:class:`~harness.memory.tracker.MemoryTracker` (which sees aten ops) and the replayed ones below.
It forwards each to the :class:`~harness.memory.sim_allocator.SimulatedDevice` (which raises when
one does not fit) and keeps live bytes, the peak, the largest allocations live at the peak and
per-region (per-step) statistics. Bytes are torch's: block sizes rounded up to 512 bytes.

What is memoised, and why it is sound. On ``meta`` a Llama-3.1-8B forward is ~2000 aten ops whose
meta kernels run in Python; the gsm8k workload has ~460 steps with ~360 distinct
``(num_tokens, num_reqs)`` shapes, so memoising whole steps by shape would barely help (measured on
this 2-core box: the full gsm8k run takes 104 s running every layer, 31 s with layer replay). What repeats
is *within* a step: the 32 decoder layers. :class:`LayerReplay` wraps each decoder layer; the first
layer of a step runs for real while the ledger records its allocation events, and every later layer
whose key matches replays the recorded events instead of running. The key is (layer class, layer
attention type, impl class, shapes and dtypes of ``positions`` and ``hidden_states``, the layer's KV
cache shape and dtype, and the identity of the layer's metadata object). On ``meta`` nothing has
data, so an op's allocations depend only on shapes, dtypes and Python-level values; two layers
with equal keys run the same code on equal shapes with the *same* metadata object, hence allocate
the same sizes in the same order. The memo lives for one forward only (object identities are not
reused while it lives; it is cleared before every step). A recording is replayed only if it is
self-contained: it freed nothing allocated before it, and the only allocation still alive at its
end is the layer's output. The replay accounts that output at its recorded place in the event
order and returns a fresh (untracked) ``meta`` tensor of the output's shape whose death frees it,
as the real output's death would. A layer that keeps memory alive past its forward (e.g. one that
caches something on the metadata) is therefore never replayed, and runs for real every time. Replayed events go through the same device check: an
allocation that does not fit raises the same error, with the recorded op and source line.
``memoize=False`` turns replay off; the suite checks both modes give identical accounting.
"""

from __future__ import annotations

import contextlib
import heapq
import weakref
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import (  # pyright: ignore[reportPrivateUsage]
    _disable_current_modes,  # pyright: ignore[reportPrivateUsage]
)

from harness.memory.sim_allocator import SimulatedDevice, SimulatedOutOfMemoryError, round_size
from harness.memory.tracker import Allocation, MemoryTracker
from harness.reference.model import LlamaDecoderLayer
from harness.reference.runner import ModelRunner

SNAPSHOT_SIZE = 64
"""Allocations kept at the peak: enough to group the KV cache and a regression's copies by site."""


@dataclass(slots=True)
class RegionSummary:
    """Live bytes at the start, the peak inside and the end of one named region (e.g. a step)."""

    name: str
    start_bytes: int
    peak_bytes: int
    end_bytes: int = 0


@dataclass(eq=False)
class _Recording:
    events: list[tuple[bool, int, Allocation | None]] = field(
        default_factory=list[tuple[bool, int, Allocation | None]]
    )
    """(is_alloc, local index, allocation) in order; frees carry no allocation."""
    tokens: dict[int, int] = field(default_factory=dict[int, int])
    """Ledger token -> local index, for allocations made inside the recording."""
    external_free: bool = False


class Ledger:
    """One account of every allocation the simulated device sees, real or replayed."""

    def __init__(self, device: SimulatedDevice, *, top_k: int = 10) -> None:
        self.device = device
        self.top_k = top_k
        self.snapshot_k = max(top_k, SNAPSHOT_SIZE)
        self.live_at_oom: list[Allocation] | None = None
        """Every allocation alive when an allocation did not fit (None: none failed)."""
        self.tracker = MemoryTracker(
            devices=("meta",),
            top_k=top_k,
            on_alloc=self._on_alloc,
            on_free=self._on_free,
            record_timeline=False,
        )
        self.account_existing: Callable[[Iterable[torch.Tensor], str], int] = (
            self.tracker.account_existing
        )
        """Count tensors created before the tracker (the weights); their source is the caller's."""
        self._live: dict[int, Allocation] = {}
        self._token_of: dict[int, int] = {}
        self._next_token = -1
        self._current = 0
        self._peak = 0
        self._at_peak = True
        self._peak_snapshot: list[Allocation] = []
        self.peak_region: str | None = None
        self.regions: list[RegionSummary] = []
        self._active: list[RegionSummary] = []
        self._recordings: list[_Recording] = []

    # MemoryCounter -----------------------------------------------------------------------------

    @property
    def current_bytes(self) -> int:
        return self._current

    @property
    def peak_bytes(self) -> int:
        return self._peak

    def reset_peak(self) -> None:
        self._peak = self._current
        self._at_peak = True
        self._peak_snapshot = []

    @contextlib.contextmanager
    def region(self, name: str) -> Generator[RegionSummary, None, None]:
        """Name the events inside the block (also for the tracker's allocation labels)."""
        stats = RegionSummary(name, self._current, self._current)
        self.regions.append(stats)
        self._active.append(stats)
        try:
            with self.tracker.region(name):
                yield stats
        finally:
            self._active.pop()
            stats.end_bytes = self._current

    # Results -----------------------------------------------------------------------------------

    def peak_allocations(self) -> list[Allocation]:
        """The largest allocations live at the peak (up to ``snapshot_k``), largest first."""
        if self._at_peak:
            return heapq.nlargest(self.snapshot_k, self._live.values(), key=_size)
        return self._peak_snapshot

    def live_allocations(self) -> list[Allocation]:
        """Every allocation alive now, largest first."""
        return sorted(self._live.values(), key=_size, reverse=True)

    # Events ------------------------------------------------------------------------------------

    def __enter__(self) -> Ledger:
        self.tracker.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.tracker.__exit__(exc_type, exc, traceback)

    def _on_alloc(self, allocation: Allocation) -> None:
        self._token_of[id(allocation)] = self.allocate(allocation)

    def _on_free(self, allocation: Allocation) -> None:
        token = self._token_of.pop(id(allocation), None)
        if token is not None:
            self.free(token)

    def allocate(self, allocation: Allocation) -> int:
        """Account ``allocation`` (raises when it does not fit); returns its token for ``free``."""
        try:
            self.device.allocate(allocation)
        except SimulatedOutOfMemoryError:
            self.live_at_oom = list(self._live.values())  # before unwinding frees anything
            raise
        token = self._next_token
        self._next_token -= 1
        self._live[token] = allocation
        self._current += round_size(allocation.nbytes)
        if self._current > self._peak:
            self._peak = self._current
            self._at_peak = True
            self.peak_region = self._active[-1].name if self._active else None
        for stats in self._active:
            stats.peak_bytes = max(stats.peak_bytes, self._current)
        for recording in self._recordings:
            recording.tokens[token] = len(recording.events)
            recording.events.append((True, len(recording.events), allocation))
        return token

    def free(self, token: int) -> None:
        """Release the allocation ``allocate`` returned ``token`` for."""
        if self._at_peak:
            self._peak_snapshot = heapq.nlargest(self.snapshot_k, self._live.values(), key=_size)
            self._at_peak = False
        allocation = self._live.pop(token)
        self.device.free(allocation)
        self._current -= round_size(allocation.nbytes)
        for recording in self._recordings:
            index = recording.tokens.pop(token, None)
            if index is None:
                recording.external_free = True
            else:
                recording.events.append((False, index, None))

    @contextlib.contextmanager
    def recording(self) -> Generator[_Recording, None, None]:
        """Record the allocation events inside the block."""
        recording = _Recording()
        self._recordings.append(recording)
        try:
            yield recording
        finally:
            self._recordings.remove(recording)


@dataclass(eq=False)
class _Replayable:
    events: list[tuple[bool, int, Allocation | None]]
    """The recorded events, the output's allocation included."""
    output_index: int
    shape: torch.Size
    stride: tuple[int, ...]
    dtype: torch.dtype
    keep: object
    """The metadata object of the key, kept alive so its identity is not reused."""


def _replayable(recording: _Recording, out: object, keep: object) -> _Replayable | None:
    if recording.external_free or not isinstance(out, torch.Tensor) or not out.is_meta:
        return None
    leftovers = list(recording.tokens.values())
    if len(leftovers) != 1:
        return None
    index = leftovers[0]
    allocation = recording.events[index][2]
    if allocation is None or allocation.nbytes != out.untyped_storage().nbytes():
        return None
    if tuple(allocation.shape) != tuple(out.shape):
        return None
    return _Replayable(
        events=recording.events,
        output_index=index,
        shape=out.shape,
        stride=out.stride(),
        dtype=out.dtype,
        keep=keep,
    )


class LayerReplay(nn.Module):
    """A decoder layer that replays the allocations of an identical earlier layer (see module doc)."""

    def __init__(
        self, layer: LlamaDecoderLayer, ledger: Ledger, memo: dict[tuple[Any, ...], Any]
    ) -> None:
        super().__init__()
        self.layer = layer
        self._ledger = ledger
        self._memo = memo
        self.num_replays = 0

    def forward(
        self,
        positions: torch.Tensor,
        hidden_states: torch.Tensor,
        kv_caches: dict[str, torch.Tensor],
        attn_metadata: dict[str, object] | None,
    ) -> torch.Tensor:
        attn = self.layer.self_attn.attn
        name = attn.layer_name
        metadata = None if attn_metadata is None else attn_metadata[name]
        kv_cache = kv_caches.get(name)
        key = (
            type(self.layer),
            attn.sliding_window,
            type(attn.impl),
            tuple(positions.shape),
            positions.dtype,
            tuple(hidden_states.shape),
            hidden_states.dtype,
            None if kv_cache is None else (tuple(kv_cache.shape), kv_cache.dtype),
            id(metadata),
        )
        entry = self._memo.get(key)
        if isinstance(entry, _Replayable):
            self.num_replays += 1
            return self._replay(entry)
        with self._ledger.recording() as recording:
            out: torch.Tensor = self.layer(positions, hidden_states, kv_caches, attn_metadata)
        if entry is None:
            self._memo[key] = _replayable(recording, out, metadata) or False
        return out

    def _replay(self, entry: _Replayable) -> torch.Tensor:
        """Issue the recorded events; the output becomes a real (untracked) tensor we account."""
        ledger = self._ledger
        tokens: dict[int, int] = {}
        try:
            for is_alloc, index, allocation in entry.events:
                if not is_alloc:
                    ledger.free(tokens.pop(index))
                    continue
                assert allocation is not None
                tokens[index] = ledger.allocate(allocation)
        except BaseException:
            for token in tokens.values():
                ledger.free(token)
            raise
        with _disable_current_modes():  # the tracker must not count it twice
            out = torch.empty_strided(entry.shape, entry.stride, dtype=entry.dtype, device="meta")
        weakref.finalize(out.untyped_storage(), ledger.free, tokens.pop(entry.output_index))
        assert not tokens, "a replayable recording frees all but its output"
        return out


def install_layer_replay(runner: ModelRunner, ledger: Ledger) -> dict[tuple[Any, ...], Any]:
    """Wrap every decoder layer of ``runner.model``; returns the memo (clear it every forward)."""
    memo: dict[tuple[Any, ...], Any] = {}
    layers = runner.model.model.layers
    for i, layer in enumerate(layers):
        assert isinstance(layer, LlamaDecoderLayer)
        layers[i] = LayerReplay(layer, ledger, memo)
    return memo


def _size(allocation: Allocation) -> int:
    return allocation.nbytes
