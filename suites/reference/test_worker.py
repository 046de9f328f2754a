"""vLLM's KV cache sizing over the reference runner on a simulated device."""

from __future__ import annotations

import torch

from harness.memory.devices import DeviceProfile
from harness.memory.ledger import Ledger
from harness.memory.sim_allocator import SimulatedDevice
from harness.memory.sizes import GiB, MiB
from harness.memory.tracker import MemoryTracker
from harness.reference.config import CacheConfig, SchedulerConfig, VllmConfig, get_model_config
from harness.reference.model import weight_bytes
from harness.reference.runner import ModelRunner
from harness.reference.worker import KVCacheSizing, determine_available_memory, size_kv_cache


def test_available_memory_is_vllms_formula() -> None:
    # int(total * gpu_memory_utilization - peak_memory), truncated like vLLM's int(...).
    assert determine_available_memory(100, 0.9, 40) == 50
    assert determine_available_memory(95 * GiB, 0.9, 17 * GiB) == int(95 * GiB * 0.9 - 17 * GiB)
    assert determine_available_memory(10, 0.5, 7) == -2


def _runner(utilization: float = 0.9) -> ModelRunner:
    config = VllmConfig(
        model_config=get_model_config("tiny"),
        cache_config=CacheConfig(gpu_memory_utilization=utilization),
        scheduler_config=SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=64),
    )
    return ModelRunner(config, "meta", "FLASHINFER")


def _tracker(total: int, non_torch: int) -> MemoryTracker:
    device = SimulatedDevice(DeviceProfile("test", total, non_torch_bytes=non_torch))
    return MemoryTracker(Ledger(capacity=device), devices=("meta",), all_threads=False)


def test_sizing_follows_vllms_order_and_arithmetic() -> None:
    runner = _runner()
    tracker = _tracker(64 * MiB, 4 * MiB)
    ledger = tracker.ledger
    with tracker, torch.inference_mode():
        sizing = size_kv_cache(runner, tracker, capacity_bytes=64 * MiB, non_torch_bytes=4 * MiB)
        kv_live = sum(t.untyped_storage().nbytes() for t in runner.kv_caches.values())
    # 1. weights and runner buffers first, 2. profile_run, 3./4. the formula, 5./6. the caches.
    assert [r.name for r in ledger.regions] == ["load_model", "profile_run", "initialize_kv_cache"]
    assert sizing.weights_bytes >= weight_bytes(runner.get_model())
    load = ledger.regions[0]
    assert load.end_bytes == sizing.weights_bytes  # weights and runner buffers, nothing else
    assert {a.op for a in ledger.live_allocations()} >= {"weights", "runner buffers"}
    assert sizing.profile_torch_peak_bytes > sizing.weights_bytes  # the dummy forward allocated
    assert sizing.profile_peak_bytes == sizing.profile_torch_peak_bytes + 4 * MiB
    assert sizing.available_kv_cache_bytes == int(64 * MiB * 0.9 - sizing.profile_peak_bytes)
    spec = next(iter(runner.get_kv_cache_spec().values()))
    num_layers = len(runner.kv_caches)
    assert (
        sizing.num_blocks == sizing.available_kv_cache_bytes // spec.page_size_bytes // num_layers
    )
    assert sizing.kv_cache_bytes == sizing.num_blocks * spec.page_size_bytes * num_layers == kv_live
    assert sizing.kv_cache_bytes_per_layer == sizing.num_blocks * spec.page_size_bytes


def test_profile_run_frees_everything_it_allocates() -> None:
    runner = _runner()
    tracker = _tracker(64 * MiB, 0)
    with tracker, torch.inference_mode():
        size_kv_cache(runner, tracker, capacity_bytes=64 * MiB, non_torch_bytes=0)
    # The profiling forward ran before any builder existed: nothing was built, nothing kept.
    profile = tracker.ledger.region_stats("profile_run")
    assert profile.end_bytes == profile.start_bytes  # every profiling tensor was freed


def test_lower_utilization_gives_fewer_blocks() -> None:
    sizes: list[KVCacheSizing] = []
    for utilization in (0.9, 0.5):
        runner = _runner(utilization)
        tracker = _tracker(64 * MiB, 0)
        with tracker, torch.inference_mode():
            sizes.append(size_kv_cache(runner, tracker, capacity_bytes=64 * MiB, non_torch_bytes=0))
    assert sizes[1].num_blocks < sizes[0].num_blocks
    assert sizes[0].profile_torch_peak_bytes == sizes[1].profile_torch_peak_bytes
