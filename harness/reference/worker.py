"""vLLM's KV cache sizing (``Worker.determine_available_memory``) in vLLM 0.9.0's order.

Weights and persistent buffers, a profiling forward of ``max_num_batched_tokens`` dummy tokens,
non-torch memory; then ``available = total * gpu_memory_utilization - peak`` and
``num_blocks = available // page_size // num_layers``. Byte counts are the ledger's; every term,
with vLLM's source locations, is derived in ``docs/simulation.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.memory.tracker import MemoryTracker
from harness.reference.kv_cache_interface import KVCacheConfig
from harness.reference.kv_cache_utils import get_kv_cache_config
from harness.reference.runner import ModelRunner


@dataclass(frozen=True, slots=True)
class KVCacheSizing:
    """Every quantity of vLLM's KV cache sizing, for one model on one device."""

    capacity_bytes: int
    """``total_gpu_memory``: the device's total capacity."""
    gpu_memory_utilization: float
    weights_bytes: int
    """Bytes of the weights and the runner's persistent device buffers (step 1)."""
    profile_torch_peak_bytes: int
    """torch's peak allocated bytes over ``profile_run`` (weights included)."""
    non_torch_bytes: int
    """Device memory outside torch's allocator, added to the peak (step 3)."""
    available_kv_cache_bytes: int
    """``int(capacity * gpu_memory_utilization - profile_peak_bytes)``."""
    kv_cache_config: KVCacheConfig

    @property
    def profile_peak_bytes(self) -> int:
        """vLLM's ``peak_memory``: torch's profile peak plus non-torch memory."""
        return self.profile_torch_peak_bytes + self.non_torch_bytes

    @property
    def num_blocks(self) -> int:
        return self.kv_cache_config.num_blocks

    @property
    def kv_cache_bytes(self) -> int:
        """Bytes of all layers' KV cache tensors."""
        return sum(t.size for t in self.kv_cache_config.tensors.values())

    @property
    def kv_cache_bytes_per_layer(self) -> int:
        """Bytes of the largest single layer's KV cache tensor."""
        return max((t.size for t in self.kv_cache_config.tensors.values()), default=0)


def determine_available_memory(
    total_gpu_memory: int, gpu_memory_utilization: float, peak_memory: int
) -> int:
    """vLLM's formula: the bytes the KV cache may take (negative when the model does not fit)."""
    return int(total_gpu_memory * gpu_memory_utilization - peak_memory)


def size_kv_cache(
    runner: ModelRunner,
    tracker: MemoryTracker,
    *,
    capacity_bytes: int,
    non_torch_bytes: int,
) -> KVCacheSizing:
    """Run steps 1-6 on ``runner`` under the active ``tracker``; the KV caches exist afterwards."""
    vllm_config = runner.vllm_config
    ledger = tracker.ledger
    weights_bytes = 0
    with ledger.region("load_model"):
        for label, tensors in runner.persistent_device_tensors().items():
            weights_bytes += tracker.account_existing(tensors, label)
    ledger.reset_peak()  # torch.cuda.reset_peak_memory_stats()
    with ledger.region("profile_run"):
        runner.profile_run()
    torch_peak = ledger.peak_bytes
    non_torch = max(non_torch_bytes, 0)  # vLLM adds it only when positive
    utilization = vllm_config.cache_config.gpu_memory_utilization
    available = determine_available_memory(capacity_bytes, utilization, torch_peak + non_torch)
    kv_cache_config = get_kv_cache_config(vllm_config, runner.get_kv_cache_spec(), available)
    with ledger.region("initialize_kv_cache"):
        runner.initialize_kv_cache(kv_cache_config)
    return KVCacheSizing(
        capacity_bytes=capacity_bytes,
        gpu_memory_utilization=utilization,
        weights_bytes=weights_bytes,
        profile_torch_peak_bytes=torch_peak,
        non_torch_bytes=non_torch,
        available_kv_cache_bytes=available,
        kv_cache_config=kv_cache_config,
    )
