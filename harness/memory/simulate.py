"""Simulate a workload at full model scale on a simulated GPU: vLLM's sizing, then every serving step.

``simulate(model="llama-3.1-8b", device="h100-95", workload=gsm8k())`` builds the reference
:class:`~harness.reference.runner.ModelRunner` on the ``meta`` device (full shapes, weights counted,
no data), sizes the KV cache exactly as vLLM does (:mod:`harness.memory.sizing`), then drives the
reference :class:`~harness.reference.scheduler.Scheduler` over the workload, one
``execute_model`` per step, with every allocation checked against the device's capacity. It stops
at the end of the workload or at the first allocation that does not fit
(:class:`~harness.memory.sim_allocator.SimulatedOutOfMemoryError`, torch's message plus the op and
the source line). All data-dependent metadata is computed on the CPU by the runner and the builders.

Accounting and replay live in :mod:`harness.memory.ledger`: every allocation, real or replayed,
goes through one :class:`~harness.memory.ledger.Ledger` and the device's capacity check; the 31
decoder layers after the first of each step replay the first one's allocation events (what is
memoised and why that is sound is documented there; ``memoize=False`` runs every layer).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Generator, Iterable
from dataclasses import dataclass, replace
from typing import Any

import torch

from harness.errors import HarnessError
from harness.memory.devices import DeviceProfile, get_device_profile
from harness.memory.ledger import LayerReplay, Ledger, install_layer_replay
from harness.memory.sim_allocator import SimulatedDevice, SimulatedOutOfMemoryError
from harness.memory.sizes import format_size
from harness.memory.sizing import KVCacheSizing, size_kv_cache
from harness.memory.tracker import Allocation
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
from harness.reference.runner import ModelRunner
from harness.reference.scheduler import Request, Scheduler
from harness.regressions import get_regression

DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
"""vLLM's ``CacheConfig.gpu_memory_utilization`` default (lm-eval's ``vllm`` model passes 0.9 too)."""


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
        if self.count * self.largest == self.nbytes:  # all the same size
            sizes = f"{self.count:>4} x {format_size(self.largest):>10}"
        else:
            sizes = f"{self.count:>4} up to {format_size(self.largest):>10}"
        return f"{sizes} = {format_size(self.nbytes):>10}  {self.op}{where}"

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
    backend: type[AttentionBackend] | None = None,
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
    if backend is None:
        backend = FlashInferBackend if regression is None else get_regression(regression).backend
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
