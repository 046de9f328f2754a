"""FlashMLA-style builder: the pure-Python ``get_mla_metadata`` scheduler and its decode metadata."""

from __future__ import annotations

import pytest
import torch

from harness.reference.backends.mla.flashmla import (
    FlashMLABackend,
    FlashMLADecodeMetadata,
    FlashMLAMetadata,
    FlashMLAMetadataBuilder,
    get_mla_metadata,
    get_num_sm_parts,
)
from harness.reference.batch import make_batch


def test_two_requests_fit_one_partition_each() -> None:
    # 192 and 64 tokens = 3 and 1 blocks of 64; 2 partitions; payload max(cdiv(14, 2) + 5, 10) = 12.
    tile, num_splits = get_mla_metadata([192, 64], 16, 1, num_sms=2)
    assert tile.tolist() == [[0, 0, 0, 192, 0, 0, 0, 0], [1, 0, 1, 64, 0, 0, 0, 0]]
    assert num_splits.tolist() == [0, 1, 2]


def test_a_long_request_is_split_across_partitions() -> None:
    # 20 blocks, payload max(cdiv(25, 2) + 5, 10) = 18: partition 0 takes 13 blocks (832 tokens),
    # partition 1 the remaining 7 as the request's second split.
    tile, num_splits = get_mla_metadata([1280], 16, 1, num_sms=2)
    assert tile.tolist() == [[0, 0, 0, 832, 0, 0, 0, 0], [0, 832, 0, 1280, 1, 0, 0, 0]]
    assert num_splits.tolist() == [0, 2]


@pytest.mark.parametrize("seqlens", [[1], [5, 700, 64, 3000, 1], [4096] * 7])
def test_every_token_is_scheduled_exactly_once(seqlens: list[int]) -> None:
    tile, num_splits = get_mla_metadata(seqlens, 128, 1)
    assert tile.shape == (get_num_sm_parts(128, 1), 8) == (66, 8)
    covered = [0] * len(seqlens)
    for begin_req, begin_tok, end_req, end_tok, *_ in tile.tolist():
        for req in range(begin_req, end_req + 1):
            start = begin_tok if req == begin_req else 0
            stop = end_tok if req == end_req else seqlens[req]
            covered[req] += max(stop - start, 0)
    assert covered == seqlens
    assert num_splits[0] == 0 and (num_splits[1:] > num_splits[:-1]).all()


def test_decode_metadata_carries_the_schedule() -> None:
    batch = make_batch([5, 70, 0], [1, 1, 6], use_mla=True, num_kv_heads=1, num_blocks=64)
    builder = FlashMLAMetadataBuilder(batch.spec, batch.block_table, batch.vllm_config, "cpu")
    md = builder.build(0, batch.common)
    assert isinstance(md, FlashMLAMetadata) and isinstance(md.decode, FlashMLADecodeMetadata)
    tile, splits = get_mla_metadata([6, 71], batch.vllm_config.model_config.num_attention_heads, 1)
    assert torch.equal(md.decode.tile_scheduler_metadata, tile)
    assert torch.equal(md.decode.num_splits, splits)
    assert FlashMLABackend.get_builder_cls() is FlashMLAMetadataBuilder
    assert FlashMLABackend.get_name() == "FLASHMLA_VLLM_V1"


def test_meta_device_shapes() -> None:
    batch = make_batch([5, 7, 0], [1, 1, 6], use_mla=True, num_kv_heads=1, device="meta")
    builder = FlashMLAMetadataBuilder(batch.spec, batch.block_table, batch.vllm_config, "meta")
    md = builder.build(0, batch.common)
    assert md.decode is not None
    assert md.decode.tile_scheduler_metadata.is_meta
    assert md.decode.tile_scheduler_metadata.shape == (get_num_sm_parts(4, 1), 8)
    assert md.decode.num_splits.shape == (3,)
