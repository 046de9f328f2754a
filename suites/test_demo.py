"""``harness demo``: tables per group and step, the oracle verdict, exit codes, bad input."""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.console import Console

from harness.cli import main
from harness.demo_report import demo
from harness.reference.backends.flash_attn import (
    FlashAttentionBackend,
    FlashAttentionMetadata,
    FlashAttentionMetadataBuilder,
)
from harness.reference.common_metadata import CommonAttentionMetadata


def test_default_demo_shows_both_groups_and_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "hybrid-two-groups" in out
    assert "group 0 (FullAttentionSpec" in out and "group 1 (SlidingWindowSpec" in out
    assert "block table row" in out and "slot mapping" in out and "FlashAttentionMetadata:" in out
    assert "oracle: OK" in out and "atol=0.0001, rtol=0.0001" in out


def test_demo_with_another_scenario_and_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--scenario", "single-prefill", "--backend", "FLASHINFER"]) == 0
    out = capsys.readouterr().out
    assert "backend FLASHINFER" in out and "FlashInferMetadata:" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["demo", "--scenario", "nope"],
            "unknown scenario 'nope'; available: cascade-common-prefix",
        ),
        (["demo", "--backend", "nope"], "unknown attention backend 'nope'; available:"),
        (["demo", "--backend", "FLASHMLA"], "is an MLA backend"),
        (["demo", "--backend", "FLASHINFER"], "cannot run on FlashInfer (as in vLLM 0.9.0)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness: error: ") and message in err and "Traceback" not in err


class _StaleSeqLensBuilder(FlashAttentionMetadataBuilder):
    """A broken builder: attends over one token too few."""

    def build(
        self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata
    ) -> FlashAttentionMetadata:
        md = super().build(common_prefix_len, common_attn_metadata)
        return dataclasses.replace(md, seq_lens=(md.seq_lens - 1).clamp(min=1))


class _StaleSeqLensBackend(FlashAttentionBackend):
    @staticmethod
    def get_builder_cls() -> type[FlashAttentionMetadataBuilder]:
        return _StaleSeqLensBuilder


def test_demo_exits_1_when_the_oracle_disagrees() -> None:
    buffer = io.StringIO()
    assert demo("mixed-prefill-decode", _StaleSeqLensBackend, Console(file=buffer, width=120)) == 1
    assert "oracle: MISMATCH" in buffer.getvalue()
