"""ROCm AITER MLA backend (vLLM 0.9.0 ``vllm/v1/attention/backends/mla/rocm_aiter_mla.py``).

Its builder overrides ``_build_decode(block_table_tensor, seq_lens)`` to add the CSR page tensors
AITER's decode kernel reads. This is the subclass whose ``_build_decode`` kept the old
``block_table`` parameter name in vLLM PR #17483 and crashed when ``build()`` passed
``block_table_tensor=`` by keyword; ours has the right names.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.reference.backends.mla.common import (
    MLACommonBackend,
    MLACommonDecodeMetadata,
    MLACommonMetadata,
    MLACommonMetadataBuilder,
)
from harness.reference.backends.utils import (
    compute_paged_kv_indices,
    compute_paged_kv_indptr,
    compute_paged_kv_last_page_len,
)
from harness.reference.block_table import BlockTable
from harness.reference.config import VllmConfig
from harness.reference.kv_cache_interface import AttentionSpec


@dataclass
class AiterMLADecodeMetadata(MLACommonDecodeMetadata):
    """Decode part plus AITER's CSR description of the pages."""

    paged_kv_indptr: torch.Tensor
    """(num_decodes + 1,) int32: start of each request's pages in ``paged_kv_indices``."""
    paged_kv_indices: torch.Tensor
    """(total_pages,) int32: every decode request's pages, concatenated."""
    paged_kv_last_page_len: torch.Tensor
    """(num_decodes,) int32: tokens in each request's last page."""
    qo_indptr: torch.Tensor
    """(num_decodes + 1,) int32: ``arange``, one query token per decode."""


@dataclass
class AiterMLAMetadata(MLACommonMetadata[AiterMLADecodeMetadata]):
    """MLA metadata whose decode part is :class:`AiterMLADecodeMetadata`."""


class AiterMLAMetadataBuilder(MLACommonMetadataBuilder[AiterMLAMetadata]):
    """Adds AITER's ``paged_kv_indptr`` / ``paged_kv_indices`` / ``paged_kv_last_page_len``."""

    def __init__(
        self,
        kv_cache_spec: AttentionSpec,
        block_table: BlockTable,
        vllm_config: VllmConfig,
        device: torch.device | str,
    ) -> None:
        super().__init__(kv_cache_spec, block_table, vllm_config, device, AiterMLAMetadata)

    def _build_decode(
        self, block_table_tensor: torch.Tensor, seq_lens: torch.Tensor
    ) -> AiterMLADecodeMetadata:
        # vLLM masks the device block table; the data-dependent shape is computed on the CPU
        # here (from the CPU twins) so that the meta device works too.
        assert self._decode_seq_lens_cpu is not None
        page_size = self.kv_cache_spec.block_size
        num_decodes = seq_lens.shape[0]
        seq_lens_cpu = self._decode_seq_lens_cpu
        block_table_cpu = self.block_table.get_cpu_tensor()[:num_decodes]
        return AiterMLADecodeMetadata(
            block_table=block_table_tensor,
            seq_lens=seq_lens,
            paged_kv_indptr=compute_paged_kv_indptr(seq_lens_cpu, page_size).to(self.device),
            paged_kv_indices=compute_paged_kv_indices(block_table_cpu, seq_lens_cpu, page_size).to(
                self.device
            ),
            paged_kv_last_page_len=compute_paged_kv_last_page_len(seq_lens_cpu, page_size).to(
                self.device
            ),
            qo_indptr=torch.arange(num_decodes + 1, dtype=torch.int32, device=self.device),
        )


class AiterMLABackend(MLACommonBackend):
    """AITER MLA (AMD ROCm)."""

    @staticmethod
    def get_name() -> str:
        return "ROCM_AITER_MLA_VLLM_V1"

    @staticmethod
    def get_builder_cls() -> type[AiterMLAMetadataBuilder]:
        return AiterMLAMetadataBuilder

    @staticmethod
    def get_metadata_cls() -> type[AiterMLAMetadata]:
        return AiterMLAMetadata
