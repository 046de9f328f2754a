"""``flashinfer-oom``: a FlashInfer path whose per-step memory scales with the KV cache.

What vLLM shipped. After PR #17483 (per-KV-cache-group metadata builders, vLLM 0.9.0),
``VLLM_USE_V1=1 VLLM_ATTENTION_BACKEND=FLASHINFER lm_eval --model vllm --model_args
pretrained=meta-llama/Llama-3.1-8B-Instruct --tasks gsm8k --num_fewshot 5 --batch_size auto`` died
with ``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.12 GiB. GPU 0 has a total
capacity of 95.00 GiB of which 1.01 GiB is free`` on an H100 (``Tried to allocate 4.50 GiB`` on a
B200). 2.12 GiB and 4.50 GiB are one layer of Llama-3.1-8B's KV cache on those cards (about 34.7k
and 73.7k blocks of 64 KiB), so the failing allocation scaled with ``num_blocks``. vLLM sizes
``num_blocks`` from a profiling run that builds no attention metadata and runs no attention, so
memory that the attention path allocates per step is never measured: it has to fit in the
``1 - gpu_memory_utilization`` headroom, and anything proportional to the KV cache does not.

What this variant is: a reconstruction of that failure class, not of vLLM's code. It is an
attention-path allocation that scales with ``num_blocks`` and escapes profiling, calibrated so
that each allocation is one layer's KV cache, the size vLLM reported. Which line of vLLM
allocated it is not known here; the mechanism below is our hypothesis. FlashInfer's kernels can
take the paged cache in ``HND`` layout, ``(num_blocks, 2, num_kv_heads, block_size, head_size)``,
while the reference allocates ``NHD``, ``(num_blocks, 2, block_size, num_kv_heads, head_size)``.
The variant's builder converts the cache when it plans the step (the ``_plan`` seam): a contiguous
clone of ``kv_cache.permute(0, 1, 3, 2, 4)`` for every layer of its group, kept in
``paged_kv_cache_hnd`` for the wrappers. Each copy is one layer's whole KV cache, ``num_blocks *
page_size`` bytes, allocated per step and never seen by the profiling run. vLLM 0.9.0's builders
held the model runner and could reach its KV caches; ours get no runner, so the variant declares
``bind_kv_caches`` and ``ModelRunner.initialize_kv_cache`` hands it them
(:class:`harness.reference.backends.abstract.KVCacheAware`).

How to see it. ``harness memory simulate --model llama-3.1-8b --device h100-95 --workload gsm8k
--regression flashinfer-oom`` sizes the KV cache as vLLM does and runs out of memory in the first
serving step, on one of these copies, with torch's message and the ``aten.clone`` line below; on a
``b200`` the failing copy is that card's layer size. ``harness memory scaling --model tiny
--regression flashinfer-oom`` flags the same line on the tiny model: it scales with
``num_blocks`` at ``page_size_bytes`` per block.
"""

from __future__ import annotations

import torch

from harness.reference.backends.flashinfer import (
    FlashInferBackend,
    FlashInferMetadata,
    FlashInferMetadataBuilder,
)
from harness.reference.block_table import BlockTable
from harness.reference.config import VllmConfig
from harness.reference.kv_cache_interface import AttentionSpec

NAME = "flashinfer-oom"
SUMMARY = (
    "FlashInfer's builder converts every layer's paged KV cache to HND layout each step: "
    "per-step allocations of one layer's KV cache each (they scale with num_blocks)"
)


class FlashInferOOMMetadataBuilder(FlashInferMetadataBuilder):
    """The reference FlashInfer builder plus a per-step HND copy of each layer's KV cache."""

    def __init__(
        self,
        kv_cache_spec: AttentionSpec,
        block_table: BlockTable,
        vllm_config: VllmConfig,
        device: torch.device | str,
    ) -> None:
        super().__init__(kv_cache_spec, block_table, vllm_config, device)
        self.kv_caches: dict[str, torch.Tensor] = {}
        """Layer name -> KV cache of this builder's group (vLLM 0.9.0: ``self.runner.kv_caches``)."""
        self.paged_kv_cache_hnd: dict[str, torch.Tensor] = {}
        """Layer name -> ``(num_blocks, 2, num_kv_heads, block_size, head_size)``: this step's copy."""

    def bind_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        """Receive the group's KV caches (right after ``initialize_kv_cache``)."""
        self.kv_caches = dict(kv_caches)

    def _plan(self, attn_metadata: FlashInferMetadata) -> None:
        # The regression: the wrappers get the cache in HND layout, converted every step --
        # a contiguous copy of each layer's whole KV cache, num_blocks * page_size bytes each.
        self.paged_kv_cache_hnd = {
            name: kv_cache.permute(0, 1, 3, 2, 4).clone(memory_format=torch.contiguous_format)
            for name, kv_cache in self.kv_caches.items()
        }
        super()._plan(attn_metadata)


class FlashInferOOMBackend(FlashInferBackend):
    """The FlashInfer backend with the regressed builder."""

    @staticmethod
    def get_builder_cls() -> type[FlashInferOOMMetadataBuilder]:
        return FlashInferOOMMetadataBuilder
