"""ROCm AITER-style MLA builder: the paged-KV decode tensors, hand-computed."""

from __future__ import annotations

from harness.reference.backends.mla.rocm_aiter_mla import (
    AiterMLABackend,
    AiterMLADecodeMetadata,
    AiterMLAMetadataBuilder,
)
from harness.reference.batch import make_batch


def test_decode_paged_kv_tensors_hand_computed() -> None:
    # block_size 4; decodes with seq lens 6 (2 pages, 2 in the last) and 4 (1 full page),
    # then a prefill that must not appear in the decode tensors.
    batch = make_batch([5, 3, 0], [1, 1, 6], block_size=4, use_mla=True, num_kv_heads=1)
    batch.block_table.add_row([11, 4], 0)
    batch.block_table.add_row([9], 1)
    batch.block_table.add_row([1, 2], 2)
    batch.block_table.commit(3)
    builder = AiterMLAMetadataBuilder(batch.spec, batch.block_table, batch.vllm_config, "cpu")
    decode = builder.build(0, batch.common).decode
    assert isinstance(decode, AiterMLADecodeMetadata)
    assert decode.paged_kv_indptr.tolist() == [0, 2, 3]
    assert decode.paged_kv_indices.tolist() == [11, 4, 9]
    assert decode.paged_kv_last_page_len.tolist() == [2, 4]
    assert decode.qo_indptr.tolist() == [0, 1, 2]
    assert decode.seq_lens.tolist() == [6, 4]
    assert AiterMLABackend.get_name() == "ROCM_AITER_MLA_VLLM_V1"


def test_meta_device_shapes() -> None:
    batch = make_batch(
        [5, 3, 0], [1, 1, 6], block_size=4, use_mla=True, num_kv_heads=1, device="meta"
    )
    builder = AiterMLAMetadataBuilder(batch.spec, batch.block_table, batch.vllm_config, "meta")
    decode = builder.build(0, batch.common).decode
    assert isinstance(decode, AiterMLADecodeMetadata)
    assert decode.paged_kv_indices.is_meta and decode.paged_kv_indices.shape == (3,)
    assert decode.paged_kv_indptr.shape == (3,) and decode.qo_indptr.shape == (3,)
