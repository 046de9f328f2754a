"""``flashinfer-oom``: a FlashInfer path whose per-step memory scales with the KV cache.

After PR #17483 (vLLM 0.9.0), gsm8k with the V1 FlashInfer backend died with ``CUDA out of
memory. Tried to allocate 2.12 GiB`` on an H100 (4.50 GiB on a B200): one layer's KV cache,
allocated per step outside what vLLM's profiling run measures. The buggy builder clones every
layer's cache to the ``HND`` layout when it plans a step (a reconstruction of the failure class,
not of vLLM's code); the fixed one is the reference. The story, and how to see it with
``harness memory simulate`` and ``harness memory scaling``, is in ``docs/regressions.md``.
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
from harness.regressions.checks import scaling_check, simulate_check
from harness.regressions.entry import Regression, Upstream, Variant


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


REGRESSION = Regression(
    id="flashinfer-oom",
    title="FlashInfer's builder copies every layer's paged KV cache each step: per-step "
    "allocations that scale with num_blocks ran gsm8k out of GPU memory",
    upstream=(Upstream("PR", 17483, "introduced by"),),
    bug_class="memory scaling (per-step allocation proportional to the KV cache)",
    component="FlashInferMetadataBuilder._plan (per-step planning)",
    buggy=Variant(FlashInferOOMBackend),
    fixed=Variant(FlashInferBackend),
    checks=(
        # Bounded for speed: step 0 is where the buggy run dies, at the sizing both runs share;
        # `harness hunt` runs the whole workload on every default device profile.
        simulate_check(device="h100-95", max_steps=1),
        scaling_check(max_steps=1),
    ),
    found_upstream="At run time on GPUs: `lm_eval --model vllm ... --tasks gsm8k --num_fewshot 5 "
    "--batch_size auto` with the FlashInfer backend died with 'CUDA out of memory. Tried to "
    "allocate 2.12 GiB' on a 95 GiB H100 (4.50 GiB on a B200), after the PR #17483 refactor; "
    "the mechanism here is our reconstruction (see the story).",
    caught_by="The scaling detector on a tiny CPU model (`harness memory scaling`), or the "
    "simulated gsm8k run on an h100-95 profile (`harness memory simulate`), in pre-merge CI.",
    doc=__doc__ or "",
)
