"""``harness hunt --vllm-src``: a tree's rows join the hunt's table with verdicts that judge."""

from __future__ import annotations

import pytest

from harness.adapter import scaling
from harness.adapter.hunt_rows import tree_rows
from harness.adapter.platform import PlatformOptions
from harness.adapter.scaling import BackendScaling, TreeScalingFinding
from harness.hunt.job import Row
from harness.vllm_tree.tree import VllmTree

FINDING = TreeScalingFinding("vllm/x.py:3", "torch.zeros(n)", "aten.zeros.default", 4.0, "once")


def _canned(backend: str) -> BackendScaling:
    if backend == "FLASH_ATTN":
        return BackendScaling(backend, (64, 128), 20)
    if backend == "TRITON_ATTN":
        return BackendScaling(backend, (64, 128), 20, findings=[FINDING])
    return BackendScaling(backend, stopped="FLASHMLA: importing x stops it: boom")


def test_each_backend_is_a_scaling_row_beside_the_overrides_row(
    era034: VllmTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake(tree: VllmTree, backend: str, options: PlatformOptions, steps: int) -> BackendScaling:
        assert steps == 20  # quick
        return _canned(backend)

    monkeypatch.setattr(scaling, "tree_scaling", fake)
    overrides = Row("overrides", "vllm", "pass", "pass", "no error finding", 0.0)
    said: list[str] = []
    rows = tree_rows(era034, quick=True, overrides_row=lambda: overrides, say=said.append)
    assert rows[0] is overrides
    verdicts = {r.name: (r.verdict, r.expected, r.misbehaves) for r in rows[1:]}
    label = "vLLM 0.34.0+fixture"
    assert verdicts == {
        f"{label} FLASH_ATTN": ("pass", "pass", False),
        f"{label} TRITON_ATTN": ("FAIL", "pass", True),
        f"{label} FLASHMLA": ("n/a", None, False),
    }
    assert "vllm/x.py:3: aten.zeros.default grows 4 bytes/block" in rows[2].detail
    assert "not covered" in rows[3].detail and "boom" in rows[3].detail
    assert said[0].startswith("overrides ")


@pytest.mark.integration
def test_hunt_with_a_tree_puts_its_rows_in_the_same_report(era034: VllmTree) -> None:
    from harness.hunt.job import hunt

    report = hunt(entries=[], devices=(), quick=True, vllm_src=era034.root)
    names = [(r.section, r.name, r.verdict) for r in report.rows]
    assert ("overrides", str(era034.root / "vllm"), "pass") in names
    assert ("scaling", "vLLM 0.34.0+fixture FLASH_ATTN", "pass") in names
    assert ("scaling", "vLLM 0.34.0+fixture FLASHMLA", "n/a") in names
    assert report.ok


def test_a_backend_the_trees_code_ended_is_an_error_row(
    era034: VllmTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fake(tree: VllmTree, backend: str, options: PlatformOptions, steps: int) -> BackendScaling:
        return BackendScaling(
            backend, error="the process exited with status 0; its last lines:\n  | x"
        )

    monkeypatch.setattr(scaling, "tree_scaling", fake)
    overrides = Row("overrides", "vllm", "pass", "pass", "no error finding", 0.0)
    rows = tree_rows(era034, quick=True, overrides_row=lambda: overrides, say=lambda _: None)
    assert {r.verdict for r in rows[1:]} == {"error"}
    assert rows[1].detail == "the process exited with status 0; its last lines:   | x"
