"""Simulate a workload at full model scale on a simulated GPU: vLLM's sizing, then every serving step.

``simulate(model="llama-3.1-8b", device="h100-95", workload=gsm8k())`` builds the reference
:class:`~harness.reference.runner.ModelRunner` on the ``meta`` device (full shapes, weights counted,
no data), sizes the KV cache exactly as vLLM does (:mod:`harness.memory.sizing`), then drives the
reference :class:`~harness.reference.scheduler.Scheduler` over the workload, one
``execute_model`` per step, with every allocation checked against the device's capacity. It stops
at the end of the workload or at the first allocation that does not fit
(:class:`~harness.memory.sim_allocator.SimulatedOutOfMemoryError`, torch's message plus the op and
the source line). All data-dependent metadata is computed on the CPU by the runner and the builders.

Accounting. A :class:`Ledger` receives every allocation and free: the real ones from the
:class:`~harness.memory.tracker.MemoryTracker` (which sees aten ops) and the replayed ones below.
It forwards each to the :class:`~harness.memory.sim_allocator.SimulatedDevice` (which raises when
one does not fit) and keeps live bytes, the peak, the largest allocations live at the peak and
per-region (per-step) statistics. Bytes are torch's: block sizes rounded up to 512 bytes.

What is memoised, and why it is sound. On ``meta`` a forward costs ~1 ms per aten op (Python meta
kernels), ~0.9 s per Llama-3.1-8B forward; the gsm8k workload has ~460 steps with ~360 distinct
``(num_tokens, num_reqs)`` shapes, so memoising whole steps by shape would barely help. What repeats
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
as the real output's death would. A layer that keeps memory
alive past its forward (e.g. a regression that caches something on the metadata) is therefore never
replayed, and runs for real every time. Replayed events go through the same device check: an
allocation that does not fit raises the same error, with the recorded op and source line.
``memoize=False`` turns replay off; the suite checks both modes give identical accounting.
"""

from __future__ import annotations

import contextlib
import heapq
import time
import weakref
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import (  # pyright: ignore[reportPrivateUsage]
    _disable_current_modes,  # pyright: ignore[reportPrivateUsage]
)

from harness.errors import HarnessError
from harness.memory.devices import DeviceProfile, get_device_profile
from harness.memory.sim_allocator import SimulatedDevice, SimulatedOutOfMemoryError, round_size
from harness.memory.sizes import format_size
from harness.memory.sizing import KVCacheSizing, size_kv_cache
from harness.memory.tracker import Allocation, MemoryTracker
from harness.memory.workload import Workload
from harness.reference.backends.abstract import AttentionBackend
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.reference.config import (
    CacheConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
    get_model_config,
)
from harness.reference.kv_cache_utils import InsufficientKVCacheMemoryError
from harness.reference.model import LlamaDecoderLayer
from harness.reference.runner import ModelRunner
from harness.reference.scheduler import Request, Scheduler
from harness.regressions import bind_kv_caches, get_regression

SNAPSHOT_SIZE = 64
"""Allocations kept at the peak: enough to group the KV cache and a regression's copies by site."""

DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's ``CacheConfig.gpu_memory_utilization`` default (lm-eval's ``vllm`` model passes 0.9 too)."""


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


@dataclass(frozen=True, slots=True)
class AllocationSite:
    """Live allocations grouped by op and source line: how many, how large."""

    op: str
    source: str | None
    line_text: str
    count: int
    nbytes: int
    """Bytes of all of them together."""
    largest: int

    def describe(self) -> str:
        where = f" at {self.source}" if self.source else ""
        return (
            f"{self.count:>4} x {format_size(self.largest):>10} = {format_size(self.nbytes):>10}"
            f"  {self.op}{where}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "source": self.source,
            "line_text": self.line_text,
            "count": self.count,
            "nbytes": self.nbytes,
            "largest": self.largest,
        }


def group_by_site(allocations: Iterable[Allocation], k: int) -> list[AllocationSite]:
    """The ``k`` sites holding the most bytes among ``allocations``."""
    groups: dict[tuple[str, str | None], list[Allocation]] = {}
    for allocation in allocations:
        source = None if allocation.source is None else str(allocation.source)
        groups.setdefault((allocation.op, source), []).append(allocation)
    sites = [
        AllocationSite(
            op=op,
            source=source,
            line_text="" if members[0].source is None else members[0].source.text,
            count=len(members),
            nbytes=sum(a.nbytes for a in members),
            largest=max(a.nbytes for a in members),
        )
        for (op, source), members in groups.items()
    ]
    return sorted(sites, key=lambda site: site.nbytes, reverse=True)[:k]


@dataclass
class StepRecord:
    """One serving step: its shape and its live bytes."""

    step: int
    num_reqs: int
    num_tokens: int
    start_bytes: int
    peak_bytes: int
    end_bytes: int


@dataclass
class SimulationResult:
    """Everything one simulation found; ``to_dict()`` is the ``--json`` object."""

    model: str
    device: DeviceProfile
    workload: str
    regression: str | None
    gpu_memory_utilization: float
    non_torch_bytes: int
    sizing: KVCacheSizing | None
    steps: list[StepRecord]
    peak_bytes: int
    """Highest live torch bytes of the whole run (weights, KV cache and step memory)."""
    peak_region: str | None
    top_allocations: list[Allocation]
    """The largest allocations live at the peak."""
    top_sites: list[AllocationSite]
    """Live bytes by op and source line: at the out-of-memory error if there was one, else at the
    peak."""
    oom: SimulatedOutOfMemoryError | None
    oom_step: int | None
    num_requests: int
    num_finished: int
    num_preemptions: int
    num_layer_replays: int
    wall_time_s: float

    @property
    def completed(self) -> bool:
        return self.oom is None

    def format(self) -> str:
        """The human report: sizing in vLLM's order, then the outcome."""
        capacity = self.device.total_memory
        lines = [
            f"{self.model} on {self.device.name} (total capacity {format_size(capacity)}, "
            f"non-torch {format_size(self.non_torch_bytes)}), workload {self.workload} "
            f"({self.num_requests} requests)"
            + (f", regression {self.regression}" if self.regression else "")
        ]
        sizing = self.sizing
        if sizing is not None:
            layers = len(sizing.kv_cache_config.tensors)
            lines += [
                "sizing (vLLM 0.9.0 order):",
                f"  weights + runner buffers      {format_size(sizing.weights_bytes):>12}",
                f"  profile_run torch peak        {format_size(sizing.profile_torch_peak_bytes):>12}"
                " (weights included)",
                f"  + non-torch memory            {format_size(sizing.non_torch_bytes):>12}",
                f"  available for the KV cache    {format_size(sizing.available_kv_cache_bytes):>12}"
                f" = {format_size(capacity)} x {self.gpu_memory_utilization:g} - "
                f"{format_size(sizing.profile_peak_bytes)}",
                f"  num_blocks {sizing.num_blocks}: {format_size(sizing.kv_cache_bytes_per_layer)}"
                f" per layer x {layers} layers = {format_size(sizing.kv_cache_bytes)}",
            ]
        if self.oom is not None:
            where = "while sizing" if self.oom_step is None else f"at step {self.oom_step}"
            lines.append(f"OUT OF MEMORY {where} ({len(self.steps)} steps completed):")
            lines.extend("  " + line for line in str(self.oom).splitlines())
        else:
            lines.append(
                f"completed: {len(self.steps)} steps, {self.num_finished}/{self.num_requests} "
                f"requests finished, {self.num_preemptions} preemptions; peak "
                f"{format_size(self.peak_bytes)} of {format_size(capacity)} ({self.peak_region}); "
                "every allocation fit"
            )
        if self.top_sites:
            moment = "at the out-of-memory error" if self.oom is not None else "at the peak"
            lines.append(f"live memory {moment}, by source line:")
            lines.extend("  " + site.describe() for site in self.top_sites)
        lines.append(
            f"simulated in {self.wall_time_s:.1f} s ({self.num_layer_replays} decoder layers replayed)"
        )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        sizing = self.sizing
        return {
            "model": self.model,
            "device": self.device.name,
            "workload": self.workload,
            "regression": self.regression,
            "capacity_bytes": self.device.total_memory,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "non_torch_bytes": self.non_torch_bytes,
            "weights_bytes": None if sizing is None else sizing.weights_bytes,
            "profile_peak_bytes": None if sizing is None else sizing.profile_peak_bytes,
            "profile_torch_peak_bytes": None if sizing is None else sizing.profile_torch_peak_bytes,
            "available_kv_cache_bytes": None if sizing is None else sizing.available_kv_cache_bytes,
            "num_blocks": None if sizing is None else sizing.num_blocks,
            "kv_cache_bytes": None if sizing is None else sizing.kv_cache_bytes,
            "kv_cache_bytes_per_layer": None if sizing is None else sizing.kv_cache_bytes_per_layer,
            "steps": len(self.steps),
            "num_requests": self.num_requests,
            "num_finished": self.num_finished,
            "num_preemptions": self.num_preemptions,
            "peak_bytes": self.peak_bytes,
            "peak_region": self.peak_region,
            "max_step_peak_bytes": max((s.peak_bytes for s in self.steps), default=None),
            "oom": None if self.oom is None else {**self.oom.to_dict(), "step": self.oom_step},
            "top_allocations": [a.to_dict() for a in self.top_allocations],
            "top_sites": [site.to_dict() for site in self.top_sites],
            "num_layer_replays": self.num_layer_replays,
            "wall_time_s": round(self.wall_time_s, 3),
        }


@contextlib.contextmanager
def _single_thread() -> Generator[None, None, None]:
    """One intra-op thread: meta ops do no math, and the CPU metadata tensors are small, so extra
    threads only contend (the paged-KV mask of a 1024-request step: 6 ms on one thread, ~100 ms
    on two on a loaded 2-core machine)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _size(allocation: Allocation) -> int:
    return allocation.nbytes


def _vllm_config(
    model_config: ModelConfig, workload: Workload, gpu_memory_utilization: float
) -> VllmConfig:
    limits = workload.limits
    max_model_len = min(limits.max_model_len, model_config.max_model_len)
    return VllmConfig(
        model_config=replace(model_config, max_model_len=max_model_len),
        cache_config=CacheConfig(gpu_memory_utilization=gpu_memory_utilization),
        scheduler_config=SchedulerConfig(
            max_num_seqs=limits.max_num_seqs,
            max_num_batched_tokens=limits.max_num_batched_tokens,
            max_model_len=max_model_len,
        ),
    )


def simulate(
    *,
    model: str,
    device: str,
    workload: Workload,
    regression: str | None = None,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    non_torch_bytes: int | None = None,
    memoize: bool = True,
    max_steps: int | None = None,
    top_k: int = 10,
) -> SimulationResult:
    """Size the KV cache and run ``workload`` on a simulated ``device``; see the module docstring."""
    started = time.perf_counter()
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise HarnessError(
            f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}"
        )
    model_config = get_model_config(model)
    profile = get_device_profile(device)
    backend: type[AttentionBackend] = (
        FlashInferBackend if regression is None else get_regression(regression).backend
    )
    vllm_config = _vllm_config(model_config, workload, gpu_memory_utilization)
    sim_device = SimulatedDevice(profile, non_torch_bytes=non_torch_bytes)
    runner = ModelRunner(vllm_config, "meta", backend)
    ledger = Ledger(sim_device, top_k=top_k)
    memo = install_layer_replay(runner, ledger) if memoize else {}

    sizing: KVCacheSizing | None = None
    steps: list[StepRecord] = []
    oom: SimulatedOutOfMemoryError | None = None
    oom_step: int | None = None
    scheduler: Scheduler | None = None
    with ledger, torch.inference_mode(), _single_thread():
        try:
            try:
                sizing = size_kv_cache(
                    runner,
                    ledger,
                    capacity_bytes=sim_device.capacity_bytes,
                    non_torch_bytes=sim_device.non_torch_bytes,
                )
            except InsufficientKVCacheMemoryError as exc:
                raise HarnessError(f"{model} does not fit on {device}: {exc}") from None
            bind_kv_caches(runner)
            scheduler = Scheduler(vllm_config.scheduler_config, sizing.kv_cache_config)
            for request in workload.requests:
                try:
                    scheduler.add_request(
                        Request(request.request_id, [0] * request.prompt_len, request.output_len)
                    )
                except ValueError as exc:
                    raise HarnessError(
                        f"workload {workload.name!r} does not fit model {model!r}: {exc}"
                    ) from None
            step = 0
            while scheduler.has_unfinished_requests():
                if max_steps is not None and step >= max_steps:
                    break
                oom_step = step
                memo.clear()
                with ledger.region(f"step {step}") as stats:
                    scheduler_output = scheduler.schedule()
                    output = runner.execute_model(scheduler_output)
                    scheduler.update_from_output(scheduler_output, output)
                steps.append(
                    StepRecord(
                        step=step,
                        num_reqs=len(scheduler_output.num_scheduled_tokens),
                        num_tokens=scheduler_output.total_num_scheduled_tokens,
                        start_bytes=stats.start_bytes,
                        peak_bytes=stats.peak_bytes,
                        end_bytes=stats.end_bytes,
                    )
                )
                step += 1
            oom_step = None
        except SimulatedOutOfMemoryError as exc:
            oom = exc
        top_allocations = ledger.peak_allocations()[:top_k]
        at_moment = ledger.live_at_oom if oom is not None else ledger.peak_allocations()
        top_sites = group_by_site(at_moment or [], top_k)
    num_requests = len(workload.requests)
    num_unfinished = num_requests if scheduler is None else scheduler.get_num_unfinished_requests()
    return SimulationResult(
        model=model,
        device=profile,
        workload=workload.name,
        regression=regression,
        gpu_memory_utilization=gpu_memory_utilization,
        non_torch_bytes=sim_device.non_torch_bytes,
        sizing=sizing,
        steps=steps,
        peak_bytes=ledger.peak_bytes,
        peak_region=ledger.peak_region,
        top_allocations=top_allocations,
        top_sites=top_sites,
        oom=oom,
        oom_step=oom_step,
        num_requests=num_requests,
        num_finished=num_requests - num_unfinished,
        num_preemptions=0 if scheduler is None else scheduler.num_preemptions,
        num_layer_replays=sum(
            m.num_replays for m in runner.model.modules() if isinstance(m, LayerReplay)
        ),
        wall_time_s=time.perf_counter() - started,
    )
