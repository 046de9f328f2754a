"""``dummy-run-null-block``: a dummy forward wrote its garbage K/V into the KV cache's null block.

A V1 ``_dummy_run`` that builds attention metadata took its slot mapping from a zero-initialised
buffer, so its K/V landed in slot 0, the null block (PR #39444 fixed it with ``PAD_SLOT_ID``,
naming PR #25954 as the cause). The buggy runner omits the fill; both variants use the reference
FlashAttention backend, and ``memory simulate --regression`` refuses it. Details:
``docs/regressions.md``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from harness.reference.backends.flash_attn import FlashAttentionBackend
from harness.reference.config import CacheConfig, SchedulerConfig, VllmConfig, get_model_config
from harness.reference.oracle import to_int_list
from harness.reference.runner import ModelRunner
from harness.regressions.checks import variant_engine
from harness.regressions.entry import Check, CheckOutcome, Regression, Upstream, Variant


class UnpaddedDummyRunModelRunner(ModelRunner):
    """The reference runner whose dummy run keeps whatever the slot mapping buffers hold."""

    @torch.inference_mode()
    def _dummy_run(self, num_tokens: int, skip_attn: bool = True) -> torch.Tensor:
        num_reqs = min(self.max_num_reqs, num_tokens)
        num_scheduled_tokens = np.full(num_reqs, num_tokens // num_reqs, dtype=np.int32)
        num_scheduled_tokens[-1] += num_tokens % num_reqs
        attn_metadata: dict[str, object] | None = None
        if not skip_attn:
            # The bug: no `slot_mapping_np[:num_tokens] = PAD_SLOT_ID` for any group here.
            common = self._common_attn_metadata(
                num_reqs, num_scheduled_tokens, np.zeros(num_reqs, np.int32)
            )
            attn_metadata = self._build_attn_metadata(common, num_scheduled_tokens, None)
        hidden_states = self.model.forward(
            self.input_ids[:num_tokens], self.positions[:num_tokens], self.kv_caches, attn_metadata
        )
        logit_indices = torch.as_tensor(np.cumsum(num_scheduled_tokens) - 1).to(self.device)
        return hidden_states[logit_indices]


BLOCK_SIZE = 16
"""FlashAttention's block size must be a multiple of 16 (vLLM 0.9.0)."""
NUM_BLOCKS = 12
"""Unlike every other KV cache dimension, so that it names the block axis."""


def _dummy_run_writes(variant: Variant) -> CheckOutcome:
    """A fresh runner's dummy run with attention metadata must leave the KV cache untouched."""
    config = VllmConfig(
        model_config=dataclasses.replace(get_model_config("tiny"), max_model_len=32),
        cache_config=CacheConfig(block_size=BLOCK_SIZE),
        scheduler_config=SchedulerConfig(
            max_num_seqs=4, max_num_batched_tokens=32, max_model_len=32
        ),
    )
    runner = variant_engine(variant, config, NUM_BLOCKS, []).runner
    before = {name: cache.clone() for name, cache in runner.kv_caches.items()}
    runner._dummy_run(16, skip_attn=False)  # pyright: ignore[reportPrivateUsage]
    shape = variant.backend.get_kv_cache_shape(NUM_BLOCKS, BLOCK_SIZE, 1, 1)
    block_axis = shape.index(NUM_BLOCKS)
    written: dict[str, list[int]] = {}
    for name, cache in runner.kv_caches.items():
        changed = (cache != before[name]).movedim(block_axis, 0).flatten(1).any(dim=1)
        if bool(changed.any()):
            written[name] = to_int_list(torch.nonzero(changed).flatten())
    if written:
        layers = ", ".join(f"{name}: blocks {blocks}" for name, blocks in written.items())
        null = " (block 0 is the null block)" if any(0 in b for b in written.values()) else ""
        return CheckOutcome(True, f"the dummy run wrote into the KV cache: {layers}{null}")
    return CheckOutcome(False, f"16 dummy tokens wrote nothing into {len(before)} layers' caches")


REGRESSION = Regression(
    id="dummy-run-null-block",
    title="A dummy run's slot mapping came from a zero-initialised buffer, so its K/V landed in "
    "the null block",
    upstream=(
        Upstream("PR", 25954, "introduced by (per the fix)"),
        Upstream("PR", 39444, "fixed by"),
    ),
    bug_class="slot mapping not padded (KV cache corruption)",
    component="ModelRunner._dummy_run slot mappings",
    buggy=Variant(FlashAttentionBackend, UnpaddedDummyRunModelRunner),
    fixed=Variant(FlashAttentionBackend),
    checks=(
        Check(
            "dummy-run-writes",
            "a fresh runner's dummy forward with attention metadata leaves every KV cache "
            "block (the null block included) untouched",
            _dummy_run_writes,
        ),
    ),
    found_upstream="From corrupted output in data-parallel + expert-parallel deployments: PR "
    "#39444 traces NaN in outputs to the null block written by idle ranks' dummy runs, and "
    "compares with the V2 runner, which already padded dummy slot mappings.",
    caught_by="A unit test that snapshots the KV cache, runs `_dummy_run` with attention "
    "metadata and asserts the cache is unchanged, as `dummy-run-writes` does.",
    doc=__doc__ or "",
)
