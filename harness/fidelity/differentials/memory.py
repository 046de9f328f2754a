"""``determine_available_memory``: vLLM's ``Worker`` method against the reference's sizing.

vLLM's side runs ``vllm/v1/worker/gpu_worker.py``'s ``Worker.determine_available_memory`` with a
fake ``torch.cuda`` whose ``mem_get_info`` and ``memory_stats`` report the drawn device state. The
reference's side runs :func:`harness.reference.worker.size_kv_cache` on a fake runner and tracker that
report the same state; the available memory it hands to ``get_kv_cache_config`` is its answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from types import SimpleNamespace

import numpy as np
import torch

from harness.fidelity.deviation import Deviation
from harness.fidelity.differential import Differential, modules_defining
from harness.fidelity.differentials.batch import returns
from harness.fidelity.vllm import VllmCode
from harness.reference import worker as sizing
from harness.reference.config import CacheConfig, VllmConfig
from harness.reference.kv_cache_interface import KVCacheConfig
from harness.vllm_tree.tree import Location, VllmTree

GiB = 1 << 30


@dataclass(frozen=True)
class DeviceState:
    """What the device reports around the profiling run (bytes)."""

    total: int
    gpu_memory_utilization: float
    torch_peak: int
    """``allocated_bytes.all.peak`` after ``profile_run``."""
    torch_current: int
    """``allocated_bytes.all.current`` after ``empty_cache``."""
    non_torch: int
    """``(total - free) - torch_current``: may be negative (the driver's view lags)."""
    free_before_profile: int


def generate_state(rng: np.random.Generator) -> DeviceState:
    """A device of 16-192 GiB and a model using part of it."""
    total = int(rng.integers(16, 193)) * GiB + int(rng.integers(0, GiB))
    torch_current = int(rng.integers(0, total // 2))
    torch_peak = torch_current + int(rng.integers(0, total // 4))
    non_torch = int(rng.integers(-GiB, 4 * GiB))
    free_after = total - torch_current - non_torch
    return DeviceState(
        total=total,
        gpu_memory_utilization=float(rng.choice([0.5, 0.8, 0.9, 0.95, 1.0])),
        torch_peak=torch_peak,
        torch_current=torch_current,
        non_torch=non_torch,
        free_before_profile=free_after + int(rng.integers(1, GiB)),
    )


def shrink_state(state: DeviceState) -> Iterator[DeviceState]:
    """Round numbers first."""
    for non_torch in (0, GiB):
        if state.non_torch != non_torch:
            yield replace(state, non_torch=non_torch)
    if state.gpu_memory_utilization != 0.9:
        yield replace(state, gpu_memory_utilization=0.9)


class _FakeCuda:
    def __init__(self, state: DeviceState) -> None:
        self.state = state
        self.profiled = False

    def empty_cache(self) -> None: ...
    def reset_peak_memory_stats(self) -> None: ...

    def mem_get_info(self) -> tuple[int, int]:
        s = self.state
        if not self.profiled:
            return s.free_before_profile, s.total
        return s.total - s.torch_current - s.non_torch, s.total

    def memory_stats(self) -> dict[str, int]:
        return {
            "allocated_bytes.all.peak": self.state.torch_peak,
            "allocated_bytes.all.current": self.state.torch_current,
        }


def available_vllm(vllm: VllmCode, state: DeviceState) -> object:
    """vLLM's ``Worker.determine_available_memory`` on a fake device."""
    module = vllm.module_defining("Worker")
    cuda = _FakeCuda(state)

    def profile_run() -> None:
        cuda.profiled = True

    worker = SimpleNamespace(
        init_gpu_memory=state.free_before_profile,
        model_runner=SimpleNamespace(profile_run=profile_run),
        cache_config=SimpleNamespace(gpu_memory_utilization=state.gpu_memory_utilization),
    )
    saved = module.__dict__["torch"]
    module.__dict__["torch"] = SimpleNamespace(**{**vars(torch), "cuda": cuda})
    try:
        return module.Worker.determine_available_memory(worker)
    finally:
        module.__dict__["torch"] = saved


def available_reference(state: DeviceState) -> object:
    """The available memory the reference's ``size_kv_cache`` computes for the same device."""
    seen: list[int] = []

    def capture(vllm_config: object, kv_cache_spec: object, available_memory: int) -> KVCacheConfig:
        del vllm_config, kv_cache_spec
        seen.append(available_memory)
        return KVCacheConfig(num_blocks=0, tensors={}, kv_cache_groups=[])

    config = VllmConfig(
        cache_config=CacheConfig(gpu_memory_utilization=state.gpu_memory_utilization)
    )
    runner = SimpleNamespace(
        vllm_config=config,
        persistent_device_tensors=dict,
        profile_run=lambda: None,
        get_kv_cache_spec=dict,
        initialize_kv_cache=returns(None),
    )
    # The ledger and tracker calls size_kv_cache makes; the profile run peaks at torch_peak.
    ledger = SimpleNamespace(
        peak_bytes=state.torch_peak,
        reset_peak=lambda: None,
        region=contextlib.nullcontext,
    )
    tracker = SimpleNamespace(ledger=ledger, account_existing=returns(0))
    saved = vars(sizing)["get_kv_cache_config"]
    setattr(sizing, "get_kv_cache_config", capture)  # noqa: B010 (patched for this call)
    try:
        sizing.size_kv_cache(
            runner,  # type: ignore[arg-type]
            tracker,  # type: ignore[arg-type]
            capacity_bytes=state.total,
            non_torch_bytes=state.non_torch,
        )
    finally:
        setattr(sizing, "get_kv_cache_config", saved)  # noqa: B010
    (available,) = seen
    return available


def _sized_by_profiling(tree: VllmTree) -> Location | None:
    """vLLM 0.34.0's ``Worker.determine_available_memory`` works from ``memory_profiling``
    snapshots instead of asking ``torch.cuda`` directly."""
    module = tree.module_defining("Worker")
    method = "Worker.determine_available_memory"
    if module is None or tree.uses(module, method, "memory_profiling") is None:
        return None
    return tree.uses(module, method, "available_kv_cache_memory_bytes")


SIZED_BY_PROFILING = Deviation(
    "sized-by-memory-profiling",
    "sizes the KV cache as requested_memory - non_kv_cache_memory - the CUDA-graph estimate, "
    "from memory_profiling snapshots (the weights, the torch peak's increase during the "
    "profile run, the non-torch memory's increase since the engine started), where 0.9.0 takes "
    "total * gpu_memory_utilization - the torch peak - all non-torch memory",
    _sized_by_profiling,
    paths=None,
)


DETERMINE_AVAILABLE_MEMORY: Differential[DeviceState] = Differential(
    name="determine-available-memory",
    description="bytes left for the KV cache after profiling (peak, non-torch memory, utilization)",
    vllm_code="Worker.determine_available_memory (vllm/v1/worker/gpu_worker.py)",
    vllm_modules=modules_defining("Worker"),
    generate=generate_state,
    run_vllm=available_vllm,
    run_reference=available_reference,
    shrink=shrink_state,
    trials=1000,
    deviations=(SIZED_BY_PROFILING,),
)
