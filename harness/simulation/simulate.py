"""Simulate a workload at full model scale on a simulated GPU: vLLM's sizing, then every serving step.

``simulate(model="llama-3.1-8b", device="h100-95", workload=gsm8k())`` builds a ``meta`` runner,
one ledger whose capacity is the simulated device, sizes the KV cache
(:mod:`harness.reference.worker`) and steps the engine until the workload ends or an allocation
does not fit (also in another thread). The result names the bytes live at the peak or error by
op and source line, and keeps the deciding step's events for the plot.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator
from dataclasses import asdict, dataclass
from typing import Any

from harness.child import mark
from harness.errors import HarnessError
from harness.memory.allocation import Allocation
from harness.memory.devices import DeviceProfile, get_device_profile
from harness.memory.ledger import AllocationSite, Ledger, LedgerEvent, Recording, RegionStats
from harness.memory.sim_allocator import SimulatedDevice, SimulatedOutOfMemoryError
from harness.memory.sizes import format_size
from harness.reference.backends.abstract import AttentionBackend
from harness.reference.backends.flashinfer import (
    FlashInferBackend,
    refuse_mixed_layers,
)
from harness.reference.engine import Engine, EngineStep, memory_tracker, tracking
from harness.reference.kv_cache_utils import InsufficientKVCacheMemoryError
from harness.reference.runner import ModelRunner
from harness.reference.scheduler import Request
from harness.reference.worker import KVCacheSizing, size_kv_cache
from harness.simulation.replay import LayerReplay, install_layer_replay
from harness.simulation.workload import DEFAULT_GPU_MEMORY_UTILIZATION, Workload, engine_config


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
class StepEvents:
    """Live bytes of one step, event by event (what the plot draws)."""

    step: int
    start_bytes: int
    peak_bytes: int
    events: list[LedgerEvent]
    """Every allocation and free of the step, in order, with the live bytes after each."""


@dataclass
class SimulationResult:
    """Everything one simulation found; ``to_dict()`` is the ``--json`` object."""

    model: str
    device: DeviceProfile
    workload: str
    regression: str | None
    """The name of the backend variant that ran (``None``: the reference backend)."""
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
    peak; the rows (with an ``other`` row when there are more sites) add up to all of them."""
    oom: SimulatedOutOfMemoryError | None
    oom_step: int | None
    focus: StepEvents | None
    """The failing step's events, or the highest step's when every allocation fit."""
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
            total = sum(site.nbytes for site in self.top_sites)
            lines.append(f"live memory {moment} ({format_size(total)}), by source line:")
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
            "top_sites": [asdict(site) for site in self.top_sites],
            "num_layer_replays": self.num_layer_replays,
            "wall_time_s": round(self.wall_time_s, 3),
        }


def simulate(
    *,
    model: str,
    device: str,
    workload: Workload,
    backend: type[AttentionBackend] | None = None,
    regression: str | None = None,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
    non_torch_bytes: int | None = None,
    memoize: bool = True,
    max_steps: int | None = None,
    top_k: int = 10,
) -> SimulationResult:
    """Size the KV cache and run ``workload`` on a simulated ``device`` (module docstring);
    ``backend`` defaults to the reference FlashInfer, ``regression`` labels it (default: its name).
    """
    started = time.perf_counter()
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise HarnessError(
            f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}"
        )
    if top_k <= 0:
        raise HarnessError(f"top_k must be positive, got {top_k}")
    profile = get_device_profile(device)
    if backend is not None and regression is None:
        regression = backend.__qualname__
    vllm_config = engine_config(model, workload, gpu_memory_utilization=gpu_memory_utilization)
    sim_device = SimulatedDevice(profile, non_torch_bytes=non_torch_bytes)
    attn_backend = backend or FlashInferBackend
    if issubclass(attn_backend, FlashInferBackend):
        refuse_mixed_layers(vllm_config)  # vLLM 0.9.0 fails the first step: say so first
    runner = ModelRunner(vllm_config, "meta", attn_backend, num_sms=profile.multi_processor_count)
    ledger = Ledger(capacity=sim_device)
    replay: LayerReplay | None = install_layer_replay(runner, ledger) if memoize else None

    sizing: KVCacheSizing | None = None
    steps: list[StepRecord] = []
    oom: SimulatedOutOfMemoryError | None = None
    focus: StepEvents | None = None
    current: list[tuple[RegionStats, Recording]] = []
    engine: Engine | None = None

    @contextlib.contextmanager
    def observed(step: int) -> Generator[None, None, None]:
        refused = ledger.refusal
        mark(f"serving step {step} of {workload.name}")
        with ledger.region(f"step {step}") as stats, ledger.recording() as recording:
            current[:] = [(stats, recording)]
            yield
        if ledger.refusal is not refused and isinstance(ledger.refusal, SimulatedOutOfMemoryError):
            raise ledger.refusal  # refused in a thread that did not pass the error on

    def record(step: EngineStep) -> None:
        nonlocal focus
        stats, recording = current[0]
        output = step.scheduler_output
        steps.append(
            StepRecord(
                step=step.index,
                num_reqs=len(output.num_scheduled_tokens),
                num_tokens=output.total_num_scheduled_tokens,
                start_bytes=stats.start_bytes,
                peak_bytes=stats.peak_bytes,
                end_bytes=ledger.current_bytes,
            )
        )
        if focus is None or stats.peak_bytes > focus.peak_bytes:
            focus = StepEvents(step.index, stats.start_bytes, stats.peak_bytes, recording.events)

    tracker = memory_tracker(ledger, "meta")
    with tracking(tracker):
        try:
            try:
                mark("the profile run that sizes the KV cache")
                sizing = size_kv_cache(
                    runner,
                    tracker,
                    capacity_bytes=sim_device.capacity_bytes,
                    non_torch_bytes=sim_device.non_torch_bytes,
                )
            except InsufficientKVCacheMemoryError as exc:
                raise HarnessError(f"{model} does not fit on {device}: {exc}") from None
            if replay is not None:
                replay.clear()
            # The layer replay keeps a forward's metadata alive: let it go right after each one.
            engine = Engine(
                runner,
                wrap_step=observed,
                after_execute=None if replay is None else replay.clear,
            )
            add_workload(engine, workload, model)
            engine.run(record, max_steps=max_steps)
        except SimulatedOutOfMemoryError as exc:
            oom = exc
            if engine is not None and current:
                stats, recording = current[0]
                events = recording.events[: recording.refused_at]
                focus = StepEvents(engine.num_steps, stats.start_bytes, stats.peak_bytes, events)
        top_allocations = ledger.peak_allocations(top_k)
        top_sites = (
            ledger.sites_at_refusal(top_k) if oom is not None else ledger.sites_at_peak(top_k)
        )
    oom_step = None if oom is None or engine is None else engine.num_steps
    scheduler = None if engine is None else engine.scheduler
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
        focus=focus,
        num_requests=num_requests,
        num_finished=num_requests - num_unfinished,
        num_preemptions=0 if scheduler is None else scheduler.num_preemptions,
        num_layer_replays=0 if replay is None else replay.num_replays,
        wall_time_s=time.perf_counter() - started,
    )


def add_workload(engine: Engine, workload: Workload, model: str) -> None:
    """Submit every request of ``workload``; one that ``model`` cannot hold is a HarnessError."""
    try:
        engine.add_requests(
            Request(r.request_id, [0] * r.prompt_len, r.output_len) for r in workload.requests
        )
    except ValueError as exc:
        raise HarnessError(
            f"workload {workload.name!r} does not fit model {model!r}: {exc}"
        ) from None
