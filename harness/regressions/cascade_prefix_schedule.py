"""``cascade-prefix-schedule``: cascade attention's prefix pass was scheduled for the whole batch.

vLLM's V1 FlashAttention (FA3) builder scheduled cascade attention's shared-prefix pass with
``batch_size=num_reqs`` instead of 1, so the first cascade batch failed with ``scheduler_metadata
must have shape (metadata_size)`` (issue #17276); PR #17283 passed ``batch_size=1``. The variants
add a stand-in for FA3's ahead-of-time schedule to the reference FlashAttention backend. Details:
``docs/regressions.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from harness.reference.backends.flash_attn import (
    FlashAttentionBackend,
    FlashAttentionImpl,
    FlashAttentionMetadata,
    FlashAttentionMetadataBuilder,
)
from harness.reference.common_metadata import CommonAttentionMetadata
from harness.regressions.entry import Check, CheckOutcome, Regression, Upstream, Variant

KV_TILE = 128
"""KV tokens per tile in the stand-in schedule."""


def schedule(batch_size: int, seqlens: torch.Tensor) -> torch.Tensor:
    """Stand-in for FA3's ``get_scheduler_metadata``: ``(batch_size + 1,)`` int32, cumulative KV
    tiles of the first ``batch_size`` sequences (sized by ``batch_size``, as FA3's is)."""
    tiles = torch.zeros(batch_size + 1, dtype=torch.int32)
    lens = seqlens.cpu()[:batch_size]
    tiles[1 : lens.shape[0] + 1] = torch.cumsum((lens + KV_TILE - 1) // KV_TILE, 0)
    return tiles


def check_schedule(scheduler_metadata: torch.Tensor | None, num_seqs: int) -> None:
    """What FA3 checks before it runs a pass over ``num_seqs`` sequences."""
    if scheduler_metadata is not None and scheduler_metadata.shape != (num_seqs + 1,):
        raise RuntimeError("scheduler_metadata must have shape (metadata_size)")


@dataclass
class ScheduledFlashAttentionMetadata(FlashAttentionMetadata):
    """FlashAttention metadata plus each pass's ahead-of-time schedule."""

    scheduler_metadata: torch.Tensor | None = None
    """(num_reqs + 1,) int32: the (suffix) pass over every request."""
    prefix_scheduler_metadata: torch.Tensor | None = None
    """(2,) int32: the cascade prefix pass, one sequence (None without cascade)."""


class ScheduledFlashAttentionMetadataBuilder(FlashAttentionMetadataBuilder):
    """The reference builder plus ahead-of-time schedules (the code after PR #17283)."""

    def build(
        self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata
    ) -> ScheduledFlashAttentionMetadata:
        md = super().build(common_prefix_len, common_attn_metadata)
        fields = {f.name: getattr(md, f.name) for f in dataclasses.fields(md)}
        num_reqs = common_attn_metadata.num_reqs
        if md.use_cascade:
            assert md.suffix_kv_lens is not None and md.prefix_kv_lens is not None
            suffix = schedule(num_reqs, md.suffix_kv_lens)
            prefix = self._schedule_prefix(num_reqs, md.prefix_kv_lens)
        else:
            suffix, prefix = schedule(num_reqs, common_attn_metadata.seq_lens_cpu), None
        return ScheduledFlashAttentionMetadata(
            **fields, scheduler_metadata=suffix, prefix_scheduler_metadata=prefix
        )

    def _schedule_prefix(self, num_reqs: int, prefix_kv_lens: torch.Tensor) -> torch.Tensor:
        del num_reqs  # the shared prefix is one sequence, whatever the batch
        return schedule(batch_size=1, seqlens=prefix_kv_lens)


class ScheduledFlashAttentionImpl(FlashAttentionImpl):
    """Checks each pass's schedule as FA3 does, then attends with the reference impl."""

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: FlashAttentionMetadata | None,
    ) -> torch.Tensor:
        if isinstance(attn_metadata, ScheduledFlashAttentionMetadata):
            if attn_metadata.use_cascade:
                check_schedule(attn_metadata.prefix_scheduler_metadata, 1)
            check_schedule(attn_metadata.scheduler_metadata, attn_metadata.seq_lens.shape[0])
        return super().forward(query, key, value, kv_cache, attn_metadata)


class ScheduledFlashAttentionBackend(FlashAttentionBackend):
    """FlashAttention with ahead-of-time schedules (fixed)."""

    @staticmethod
    def get_builder_cls() -> type[ScheduledFlashAttentionMetadataBuilder]:
        return ScheduledFlashAttentionMetadataBuilder

    @staticmethod
    def get_impl_cls() -> type[ScheduledFlashAttentionImpl]:
        return ScheduledFlashAttentionImpl

    @staticmethod
    def get_metadata_cls() -> type[ScheduledFlashAttentionMetadata]:
        return ScheduledFlashAttentionMetadata


class PrefixAsBatchMetadataBuilder(ScheduledFlashAttentionMetadataBuilder):
    """Schedules the prefix pass for ``num_reqs`` sequences: the copy-paste PR #17283 fixed."""

    def _schedule_prefix(self, num_reqs: int, prefix_kv_lens: torch.Tensor) -> torch.Tensor:
        return schedule(batch_size=num_reqs, seqlens=prefix_kv_lens)


class PrefixAsBatchBackend(ScheduledFlashAttentionBackend):
    """FlashAttention whose cascade prefix schedule is sized for the whole batch (buggy)."""

    @staticmethod
    def get_builder_cls() -> type[PrefixAsBatchMetadataBuilder]:
        return PrefixAsBatchMetadataBuilder


def _cascade(variant: Variant) -> CheckOutcome:
    """The cascade scenario (eight requests on a 256-token cached prefix) through the oracle."""
    from harness.reference.scenarios import get_scenario, run_scenario

    try:
        result = run_scenario(get_scenario("cascade-common-prefix"), variant.backend)
    except RuntimeError as exc:
        if "scheduler_metadata" not in str(exc):
            raise
        return CheckOutcome(True, f"the cascade step raised RuntimeError: {exc}")
    used = [s.step for s in result.steps if s.groups[0].metadata.get("use_cascade")]
    if not used:
        raise RuntimeError("the cascade scenario never used cascade attention: nothing was tested")
    if not result.oracle_ok:
        return CheckOutcome(
            True, f"paged attention differs from dense (max {result.max_abs_err:.3g})"
        )
    return CheckOutcome(
        False, f"cascade in step(s) {used}; {len(result.steps)} steps match dense attention"
    )


REGRESSION = Regression(
    id="cascade-prefix-schedule",
    title="Cascade attention's shared-prefix pass was scheduled as num_reqs sequences instead of one",
    upstream=(
        Upstream("issue", 17276, "reported in"),
        Upstream("PR", 17283, "fixed by"),
    ),
    bug_class="wrong metadata shape (copy-paste between cascade passes)",
    component="FlashAttentionMetadataBuilder.build, cascade prefix schedule",
    buggy=Variant(PrefixAsBatchBackend),
    fixed=Variant(ScheduledFlashAttentionBackend),
    checks=(
        Check(
            "cascade",
            "eight requests on a shared 256-token prefix: the cascade step runs and matches dense",
            _cascade,
        ),
    ),
    found_upstream="A user report on a nightly build (issue #17276: 'EngineCore encountered a "
    "fatal error', with the scheduler_metadata RuntimeError in the trace); the author of the fix "
    "called it a copy-paste bug from the suffix pass's scheduling code.",
    caught_by="A test that runs a batch whose requests share a long cached prefix (so the "
    "heuristic picks cascade attention) and compares with dense attention; such a batch never "
    "occurs in short-prompt CI tests.",
    doc=__doc__ or "",
)
