"""The scaling detector on a tree's builders: what grows with num_blocks, where, how often."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.adapter import scaling
from harness.adapter.jobs import trace_job
from harness.adapter.platform import PlatformOptions
from harness.adapter.scaling import BackendScaling, compare_traces
from harness.cli import main
from harness.vllm_tree.tree import VllmTree
from suites.adapter.conftest import ERA034, copy_tree

INJECTED = "        self.per_block = torch.zeros(vllm_config.cache_config.num_gpu_blocks * 64)\n"


def _inject(tree: VllmTree, after: str, line: str) -> int:
    """Insert ``line`` after the first line starting with ``after`` in toy.py; its line number."""
    path = tree.root / "vllm/v1/attention/backends/toy.py"
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, text in enumerate(lines) if text.startswith(after)) + 1
    lines.insert(at, line)
    path.write_text("".join(lines))
    return at + 1


def _traces(tree: VllmTree, steps: int = 12) -> tuple[dict[str, Any], dict[str, Any]]:
    options = PlatformOptions()
    a = trace_job(tree, options, "FLASH_ATTN", steps, 0, 1)
    b = trace_job(tree, options, "FLASH_ATTN", steps, 0, 2)
    return a, b


def test_the_unmodified_builder_lets_only_the_kv_cache_scale(era034: VllmTree) -> None:
    result = compare_traces("FLASH_ATTN", *_traces(era034))
    assert result.ok, result.format()
    assert result.num_blocks == (64, 128) and result.steps == 12
    assert result.kv_cache_tensors == 2
    assert "OK: nothing but the KV cache grows" in result.format()


def test_an_allocation_sized_by_num_gpu_blocks_is_named_with_its_line(tmp_path: Path) -> None:
    tree = copy_tree(ERA034, tmp_path)
    line = _inject(tree, "        self.page_budget =", INJECTED)
    result = compare_traces("FLASH_ATTN", *_traces(tree))
    assert not result.ok
    [finding] = result.findings
    assert finding.source == f"vllm/v1/attention/backends/toy.py:{line}"
    assert finding.op == "aten.zeros.default"
    assert finding.bytes_per_block == 64 * 4
    assert finding.when == "once (building the builder)"
    assert "num_gpu_blocks * 64" in finding.line_text


def test_a_per_step_allocation_says_every_step(tmp_path: Path) -> None:
    tree = copy_tree(ERA034, tmp_path)
    step_line = "        self.scratch = torch.zeros(self.vllm_config.cache_config.num_gpu_blocks)\n"
    line = _inject(tree, "        m = common_attn_metadata", step_line)
    result = compare_traces("FLASH_ATTN", *_traces(tree, steps=6))
    [finding] = result.findings
    assert finding.source.endswith(f"toy.py:{line}")
    assert finding.when == "on every step (6)"
    assert "FAIL: 1 allocation site(s) grow with num_blocks" in result.format()


def test_a_run_that_stops_says_where(tmp_path: Path) -> None:
    options = PlatformOptions()
    tree = copy_tree(ERA034, tmp_path)
    _inject(tree, "        m = common_attn_metadata", "        raise ValueError('no')\n")
    a = trace_job(tree, options, "FLASH_ATTN", 4, 0, 1)
    b = trace_job(tree, options, "FLASH_ATTN", 4, 0, 2)
    result = compare_traces("FLASH_ATTN", a, b)
    assert result.stopped is not None
    assert "step 0: ValueError: no at vllm/v1/attention/backends/toy.py:" in result.stopped


def test_sys_exit_in_the_trees_build_is_the_backends_error_not_a_stop(tmp_path: Path) -> None:
    """A builder that calls sys.exit() ends vLLM's engine: that is this check's error (exit 1),
    not a run that merely stopped (exit 0 beside backends that ran)."""
    options = PlatformOptions()
    tree = copy_tree(ERA034, tmp_path)
    _inject(tree, "        m = common_attn_metadata", "        raise SystemExit(0)\n")
    a = trace_job(tree, options, "FLASH_ATTN", 4, 0, 1)
    b = trace_job(tree, options, "FLASH_ATTN", 4, 0, 2)
    result = compare_traces("FLASH_ATTN", a, b)
    assert not result.ok
    assert result.error is not None and "called sys.exit() in step 0: SystemExit" in result.error
    assert result.format().startswith("FLASH_ATTN: ERROR: the tree's code called sys.exit()")


def test_a_child_the_trees_code_ended_fails_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``os._exit(0)`` in one backend's build (any thread), beside backends that ran: exit 1,
    never 0 (it was reported as 'not run' and the command exited 0)."""

    def fake(tree: VllmTree, backend: str, options: Any, steps: int, seed: int) -> BackendScaling:
        if backend == "TRITON_ATTN":
            return BackendScaling(backend, error="TRITON_ATTN at 1x num_blocks: the process exited")
        return BackendScaling(backend, (64, 128), steps)

    monkeypatch.setattr(scaling, "tree_scaling", fake)
    assert main(["memory", "scaling", "--vllm-src", str(ERA034), "--max-steps", "4"]) == 1
    out = capsys.readouterr().out
    assert "TRITON_ATTN: ERROR: TRITON_ATTN at 1x num_blocks: the process exited" in out
    assert "FLASH_ATTN: 4 steps at num_blocks=64 and 128" in out
