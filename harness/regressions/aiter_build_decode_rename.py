"""``aiter-build-decode-rename``: an MLA subclass kept ``block_table`` when the base renamed it.

PR #17483 (vLLM 0.9.0) renamed ``MLACommonMetadataBuilder._build_decode``'s ``block_table`` to
``block_table_tensor`` and called it by keyword; the ROCm AITER MLA override kept the old name, so
the first decode raised ``TypeError``. PR #17961 is cited as the fix. The buggy builder keeps
``block_table``; the fixed one is the reference. Details: ``docs/regressions.md``.
"""

from __future__ import annotations

import torch

from harness.reference.backends.mla.rocm_aiter_mla import (
    AiterMLABackend,
    AiterMLADecodeMetadata,
    AiterMLAMetadataBuilder,
)
from harness.reference.batch import make_batch
from harness.regressions.checks import overrides_check
from harness.regressions.entry import Check, CheckOutcome, Regression, Upstream, Variant


class AiterMLARenamedMetadataBuilder(AiterMLAMetadataBuilder):
    """The AITER MLA builder as it shipped after PR #17483: ``_build_decode`` kept ``block_table``."""

    def _build_decode(  # pyright: ignore[reportIncompatibleMethodOverride]  # harness: ignore[HO101]
        self, block_table: torch.Tensor, seq_lens: torch.Tensor
    ) -> AiterMLADecodeMetadata:
        return super()._build_decode(block_table, seq_lens)


class AiterMLARenamedBackend(AiterMLABackend):
    """AITER MLA with the renamed-parameter builder."""

    @staticmethod
    def get_builder_cls() -> type[AiterMLARenamedMetadataBuilder]:
        return AiterMLARenamedMetadataBuilder


MIXED_BATCH = [(8, 1), (5, 1), (0, 7)]
"""Two decodes (9 and 6 tokens, pages of 4) then a 7-token prefill: ``build`` calls
``_build_decode`` with keywords only when a batch has decodes."""


def _mixed_build(variant: Variant) -> CheckOutcome:
    """A decode-first prefill + decode batch through the variant's ``build()``."""
    computed, scheduled = zip(*MIXED_BATCH, strict=True)
    step = make_batch(list(computed), list(scheduled), block_size=4, num_kv_heads=1, use_mla=True)
    builder = variant.backend.get_builder_cls()(
        step.spec, step.block_table, step.vllm_config, "cpu"
    )
    try:
        metadata = builder.build(common_prefix_len=0, common_attn_metadata=step.common)
    except TypeError as exc:
        if "block_table_tensor" not in str(exc):
            raise  # a TypeError for another reason is not this bug: report it, do not count it
        return CheckOutcome(True, f"build() raised TypeError: {exc}")
    decode = metadata.decode
    if decode is None or decode.seq_lens.tolist() != step.seq_lens[:2]:
        return CheckOutcome(True, f"build() described the decodes wrongly: {decode}")
    return CheckOutcome(
        False,
        f"build() of {len(MIXED_BATCH)} requests ({metadata.num_decodes} decodes, "
        f"{metadata.num_prefills} prefill) returned {type(metadata).__name__}",
    )


REGRESSION = Regression(
    id="aiter-build-decode-rename",
    title="ROCm AITER MLA builder kept `block_table` after the base renamed it to "
    "`block_table_tensor` and started calling it by keyword",
    upstream=(
        Upstream("PR", 17483, "introduced by"),
        Upstream("PR", 17961, "fixed by"),
    ),
    bug_class="signature drift (keyword rename in an override)",
    component="MLACommonMetadataBuilder._build_decode override in the AITER MLA builder",
    buggy=Variant(AiterMLARenamedBackend),
    fixed=Variant(AiterMLABackend),
    checks=(
        overrides_check(honour_suppressions=False),
        Check(
            "mixed-build",
            "a decode-first prefill + decode batch through build(): no TypeError, decodes right",
            _mixed_build,
        ),
    ),
    found_upstream="At run time, on ROCm: the first batch with a decode request crashed in "
    "build() with the TypeError; no CI job ran the AITER backend and mypy accepted the override "
    "(the fix is cited as vLLM PR #17961).",
    caught_by="A strict override check on the PR's diff (`harness overrides --changed "
    "vllm/v1/attention/backends/mla/common.py`, which also checks every subclass), or a "
    "CPU unit test building one mixed prefill + decode batch with every MLA builder.",
    doc=__doc__ or "",
)
