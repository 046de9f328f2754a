"""The scaling detector: only the KV cache may grow with num_blocks."""

from __future__ import annotations

import argparse

import pytest
import torch

from harness.errors import HarnessError
from harness.reference.backends.abstract import AttentionBackend
from harness.regressions.flashinfer_oom import FlashInferOOMBackend
from harness.simulation import cli as memory_cli
from harness.simulation.scaling import KV_CACHE_REGION, detect_scaling
from harness.simulation.workload import tiny

from .variants import CONSTANT, SCALING, WORKSPACE_BYTES, ThreadedOOMBackend

# tiny: block 16 x 2 KV heads x head dim 64 x (K and V) x bfloat16 = 8 KiB per block per layer.
TINY_PAGE_SIZE = 16 * 2 * 64 * 2 * 2


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
        model="tiny", workload=tiny(), backend=FlashInferOOMBackend, max_steps=10
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


def test_cpu_with_real_data_gives_the_same_answer() -> None:
    report = detect_scaling(
        model="tiny",
        workload=tiny(),
        backend=FlashInferOOMBackend,
        device="cpu",
        dtype=torch.float32,
        max_steps=4,
    )
    assert not report.ok and report.regression == "FlashInferOOMBackend"
    assert report.findings[0].bytes_per_block == 2 * TINY_PAGE_SIZE  # float32


@pytest.mark.parametrize("num_blocks", [(64, 64), (0, 64), (-1, 5), (64, 10**9)])
def test_num_blocks_must_be_two_different_positive_counts(num_blocks: tuple[int, int]) -> None:
    with pytest.raises(HarnessError, match="num_blocks"):
        detect_scaling(model="tiny", workload=tiny(), num_blocks=num_blocks)


@pytest.mark.parametrize("too_few", [8, 17])
def test_too_few_blocks_is_a_clean_error(too_few: int) -> None:
    # 8 blocks cannot hold one max_model_len request; 17 force preemptions (different schedules).
    with pytest.raises(HarnessError, match="too small"):
        detect_scaling(model="tiny", workload=tiny(), num_blocks=(too_few, 128))


def test_a_kv_cache_too_large_for_real_data_on_the_cpu_is_a_clean_error() -> None:
    with pytest.raises(HarnessError, match="use --device meta"):
        detect_scaling(model="tiny", workload=tiny(), device="cpu", num_blocks=(64, 1 << 20))


# Variants the detector was never tuned on, on its default settings (meta, bfloat16) -----------


@pytest.mark.parametrize("name", sorted(SCALING))
def test_variants_that_scale_are_flagged_on_default_settings(name: str) -> None:
    report = detect_scaling(model="tiny", workload=tiny(), backend=SCALING[name], max_steps=3)
    assert not report.ok, report.format()
    (finding,) = report.findings
    assert finding.source is not None and finding.source.startswith(
        "suites/simulation/variants.py:"
    )
    assert finding.region.startswith("step ") and finding.bytes_per_block > 0


def test_a_large_constant_per_step_buffer_is_not_flagged() -> None:
    (backend,) = CONSTANT.values()
    report = detect_scaling(model="tiny", workload=tiny(), backend=backend, max_steps=3)
    assert report.ok, report.format()


def test_the_float32_cast_hides_at_float32_and_the_host_copy_hides_on_the_cpu() -> None:
    """Why the defaults are what they are: the other settings miss these variants."""
    cast = detect_scaling(
        model="tiny",
        workload=tiny(),
        backend=SCALING["kv-dtype-cast"],
        dtype=torch.float32,
        max_steps=2,
    )
    host = detect_scaling(
        model="tiny", workload=tiny(), backend=SCALING["host-built"], device="cpu", max_steps=2
    )
    assert cast.ok and host.ok


def test_the_cli_flags_a_user_variant_through_the_one_resolver(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.regressions.resolve as resolve

    variants: dict[str, type[AttentionBackend]] = {**SCALING, **CONSTANT}
    monkeypatch.setattr(resolve, "resolve_labelled_backend", lambda spec: (spec, variants[spec]))
    parser = argparse.ArgumentParser()
    memory_cli.register(parser.add_subparsers())
    for name, expected in [("host-built", 1), ("constant-workspace", 0)]:
        args = parser.parse_args(
            ["memory", "scaling", "--model", "tiny", "--regression", name, "--max-steps", "2"]
        )
        assert args.func(args) == expected
        out = capsys.readouterr().out
        assert f"tiny (bfloat16) on meta with regression {name}" in out
    assert WORKSPACE_BYTES >= 1 << 20  # "large": bigger than every per-step tensor of tiny


def test_an_allocation_made_in_another_thread_is_flagged() -> None:
    """A builder that copies the KV cache in a ``threading.Thread`` scales as the main-thread one."""
    report = detect_scaling(model="tiny", workload=tiny(), backend=ThreadedOOMBackend, max_steps=1)
    assert not report.ok, report.format()
    assert any(f.op == "aten.clone.default" for f in report.findings), report.format()
