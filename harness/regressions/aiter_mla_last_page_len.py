"""``aiter-mla-last-page-len``: AITER MLA's decode metadata put the whole sequence in the last page.

The ROCm AITER MLA builder's ``_build_decode`` set ``paged_kv_last_page_len`` to the whole sequence
length instead of the tokens in the last page; PR #31282 fixed it and PR #38146 backported the fix
to v0.13.0. The buggy builder computes it as vLLM did; the fixed builder is the reference one
(``seq_len`` modulo the page size). Details, and why the check uses pages of 4 tokens:
``docs/regressions.md``.
"""

from __future__ import annotations

import torch

from harness.reference.backends.flashinfer import paged_kv_to_block_table
from harness.reference.backends.mla.rocm_aiter_mla import (
    AiterMLABackend,
    AiterMLADecodeMetadata,
    AiterMLAMetadataBuilder,
)
from harness.reference.batch import make_batch
from harness.reference.oracle import to_int_list
from harness.regressions.entry import Check, CheckOutcome, Regression, Upstream, Variant


class AiterMLALastPageLenMetadataBuilder(AiterMLAMetadataBuilder):
    """The AITER MLA builder with vLLM's pre-#31282 ``paged_kv_last_page_len``."""

    def _build_decode(
        self, block_table_tensor: torch.Tensor, seq_lens: torch.Tensor
    ) -> AiterMLADecodeMetadata:
        decode = super()._build_decode(block_table_tensor=block_table_tensor, seq_lens=seq_lens)
        decode.paged_kv_last_page_len = torch.where(seq_lens == 0, 1, seq_lens).to(torch.int32)
        return decode


class AiterMLALastPageLenBackend(AiterMLABackend):
    """AITER MLA with the whole-sequence last page length."""

    @staticmethod
    def get_builder_cls() -> type[AiterMLALastPageLenMetadataBuilder]:
        return AiterMLALastPageLenMetadataBuilder


PAGE_SIZE = 4
DECODES = [(8, 1), (5, 1), (7, 1), (2, 1)]
"""Decodes of 9, 6, 8 and 3 tokens: last pages holding 1, 2, 4 (full) and 3 tokens."""


def _decode_pages(variant: Variant) -> CheckOutcome:
    """The CSR pages AITER's decode kernel reads must hold exactly each request's tokens."""
    computed, scheduled = zip(*DECODES, (0, 6), strict=True)
    step = make_batch(
        list(computed), list(scheduled), block_size=PAGE_SIZE, num_kv_heads=1, use_mla=True
    )
    builder = variant.backend.get_builder_cls()(
        step.spec, step.block_table, step.vllm_config, "cpu"
    )
    decode = builder.build(common_prefix_len=0, common_attn_metadata=step.common).decode
    if not isinstance(decode, AiterMLADecodeMetadata):
        return CheckOutcome(True, f"no AITER decode metadata: {decode!r}")
    last = to_int_list(decode.paged_kv_last_page_len)
    block_table, described = paged_kv_to_block_table(
        decode.paged_kv_indptr, decode.paged_kv_indices, decode.paged_kv_last_page_len, PAGE_SIZE
    )
    want = step.seq_lens[: len(DECODES)]
    pages = [
        to_int_list(row[: len(ids)]) for row, ids in zip(block_table, step.block_ids, strict=False)
    ]
    problems: list[str] = []
    if [n for n in last if not 1 <= n <= PAGE_SIZE]:
        problems.append(f"last page lengths {last} outside [1, {PAGE_SIZE}]")
    if to_int_list(described) != want:
        problems.append(
            f"the pages describe {to_int_list(described)} tokens, the requests hold {want}"
        )
    if pages != step.block_ids[: len(DECODES)]:
        problems.append(
            f"pages {pages} are not the requests' blocks {step.block_ids[: len(DECODES)]}"
        )
    if problems:
        return CheckOutcome(True, "; ".join(problems))
    return CheckOutcome(
        False, f"pages of {len(want)} decodes hold {want} tokens; last pages {last}"
    )


REGRESSION = Regression(
    id="aiter-mla-last-page-len",
    title="ROCm AITER MLA decode metadata set paged_kv_last_page_len to the whole sequence length",
    upstream=(
        Upstream("PR", 31282, "fixed by"),
        Upstream("PR", 38146, "backported to v0.13.0 by"),
    ),
    bug_class="wrong metadata value (CSR page description)",
    component="AiterMLAMetadataBuilder._build_decode (paged_kv_last_page_len)",
    buggy=Variant(AiterMLALastPageLenBackend),
    fixed=Variant(AiterMLABackend),
    checks=(
        Check(
            "decode-pages",
            "the decode CSR pages (indptr, indices, last page lengths) hold exactly each "
            "request's tokens in its own blocks",
            _decode_pages,
        ),
    ),
    found_upstream="PR #31282 describes the bug (a 127-token sequence claimed 127 tokens in its "
    "last page: the KV block size was used instead of the kernel's block size of 1), compares "
    "the line with the FlashInfer backend's modulo and lists wrong attention and possible "
    "out-of-bounds reads as the impact; it does not say how the bug was noticed.",
    caught_by="A CPU unit test that inverts every backend's CSR page description back to "
    "(block table, sequence lengths) and compares it with the batch, as `decode-pages` does.",
    doc=__doc__ or "",
)
