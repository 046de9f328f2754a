"""vLLM's KV cache sizing, in vLLM's order, over the reference runner on a simulated device.

vLLM 0.9.0 sizes the KV cache once, at start-up (``vllm/v1/worker/gpu_worker.py``
``Worker.determine_available_memory`` and ``vllm/v1/engine/core.py``
``EngineCore._initialize_kv_caches``):

1. **Load weights** (``Worker.load_model``): the weights, and the runner's persistent device
   buffers created in its constructor (``input_ids``, ``positions``, the block tables...), are
   allocated before profiling and stay for good
   (:meth:`~harness.reference.runner.ModelRunner.persistent_device_tensors`).
2. **Profile** (``torch.cuda.reset_peak_memory_stats()``, then ``GPUModelRunner.profile_run()``):
   one forward of ``max_num_batched_tokens`` dummy tokens with *no attention metadata* (nothing is
   built, nothing written) and one dummy sampler step. ``peak_memory`` is torch's
   ``allocated_bytes.all.peak`` over that run, weights included.
3. **Non-torch memory**: after ``empty_cache()``, ``(total - free) - allocated`` is device memory
   torch's allocator does not own (CUDA context, cuBLAS/NCCL workspaces); when positive it is added
   to ``peak_memory``. The simulated device carries it as ``non_torch_bytes``
   (:data:`harness.memory.devices.DEFAULT_NON_TORCH_BYTES`, documented there).
4. **Available memory**: ``int(total_gpu_memory * gpu_memory_utilization - peak_memory)``
   (``gpu_memory_utilization`` defaults to 0.9 in vLLM's ``CacheConfig`` and in lm-eval's ``vllm``
   model).
5. **KV cache config**: ``get_kv_cache_config(vllm_config, kv_cache_spec, available_memory)``:
   ``num_blocks = available // page_size // num_layers``; one tensor of ``num_blocks * page_size``
   bytes per layer (``EngineCore._initialize_kv_caches`` -> ``Worker.initialize_from_config``).
6. **Allocate** the per-layer KV caches (``GPUModelRunner.initialize_kv_cache``); serving steps
   follow, and everything they allocate must fit in what is left.

Nothing allocated after step 2 was measured: metadata building, FlashInfer's lazily created
workspace, anything a backend allocates per step. That headroom is ``(1 - gpu_memory_utilization)``
of the device plus whatever the profile peak over-estimates.

Byte counts are the ledger's: on a simulated device each allocation counts its block size
(rounded up to 512 bytes), as torch's ``allocated_bytes`` does.

Where the terms come from for Llama-3.1-8B (``max_num_batched_tokens`` 16384, ``max_num_seqs``
1024, bf16): the weights, plus the runner buffers (the device block table is ``1024 x 8192``
int32); the profiling forward peaks inside the MLP of a layer (the ``gate_up_proj`` output is
``16384 x 28672``, then ``silu`` and the product, plus the residual stream); the greedy dummy
sampler (``1024 x 128256`` logits) stays below that; then non-torch memory
(:data:`~harness.memory.devices.DEFAULT_NON_TORCH_BYTES`). ``harness memory simulate`` prints each
term; vLLM's own OOM sizes (2.12 GiB on the H100, 4.50 GiB on the B200) bound what
``peak_memory`` its run had.
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
    """Run steps 1-6 on ``runner`` under the active ``tracker``; returns the numbers.

    The runner's KV caches exist afterwards (``runner.initialize_kv_cache`` ran).
    """
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
