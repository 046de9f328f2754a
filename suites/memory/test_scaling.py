"""The scaling detector: only the KV cache may grow with num_blocks."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.memory.scaling import KV_CACHE_REGION, detect_scaling
from harness.memory.workload import tiny

# tiny: block 16 x 2 KV heads x head dim 8 x (K and V) x float32 = 2 KiB per block per layer.
TINY_PAGE_SIZE = 16 * 2 * 64 * 2 * 4  # block 16, K and V, head 64, 2 KV heads, fp32


def test_clean_reference_only_scales_the_kv_cache() -> None:
    report = detect_scaling(model="tiny", workload=tiny(), max_steps=10)
    assert report.ok, report.format()
    assert report.num_steps == 10
    assert len(report.kv_cache) == 1
    kv = report.kv_cache[0]
    assert kv.region == KV_CACHE_REGION
    assert kv.count == 2  # one tensor per layer
    assert kv.bytes_per_block == TINY_PAGE_SIZE
    assert "OK" in report.format()


def test_flashinfer_oom_is_flagged_on_the_tiny_cpu_model() -> None:
    report = detect_scaling(
        model="tiny", workload=tiny(), regression="flashinfer-oom", max_steps=10
    )
    assert not report.ok
    (finding,) = report.findings
    assert finding.source is not None
    assert finding.source.startswith("harness/regressions/flashinfer_oom.py:")
    assert "permute(0, 1, 3, 2, 4)" in finding.line_text
    assert finding.op in {"aten.contiguous.default", "aten.clone.default"}
    assert finding.bytes_per_block == TINY_PAGE_SIZE  # one layer's KV cache per copy
    assert finding.region.startswith("step ")
    assert finding.count >= 2  # every layer, every step
    text = report.format()
    assert (
        "FAIL" in text and "flashinfer_oom.py" in text and f"{TINY_PAGE_SIZE:g} bytes/block" in text
    )
    assert report.to_dict()["findings"][0]["bytes_per_block"] == TINY_PAGE_SIZE


def test_meta_device_gives_the_same_answer() -> None:
    report = detect_scaling(
        model="tiny", workload=tiny(), regression="flashinfer-oom", device="meta", max_steps=4
    )
    assert not report.ok
    assert report.findings[0].bytes_per_block == TINY_PAGE_SIZE


@pytest.mark.parametrize("num_blocks", [(64, 64), (0, 64), (-1, 5)])
def test_num_blocks_must_be_two_different_positive_counts(num_blocks: tuple[int, int]) -> None:
    with pytest.raises(HarnessError, match="num_blocks"):
        detect_scaling(model="tiny", workload=tiny(), num_blocks=num_blocks)


@pytest.mark.parametrize("too_few", [8, 17])
def test_too_few_blocks_is_a_clean_error(too_few: int) -> None:
    # 8 blocks cannot hold one max_model_len request; 17 force preemptions (different schedules).
    with pytest.raises(HarnessError, match="too small"):
        detect_scaling(model="tiny", workload=tiny(), num_blocks=(too_few, 128))
