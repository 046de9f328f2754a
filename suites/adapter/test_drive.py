"""Driving each era's builders over the sequence, as that era's runner calls them."""

from __future__ import annotations

import itertools
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from harness.adapter import stubs
from harness.adapter.backends import discover_backends
from harness.adapter.drive import BackendDriver, DriveOptions
from harness.adapter.jobs import list_job, record_job
from harness.adapter.platform import PlatformOptions, parse_capability
from harness.adapter.sequence import SequenceSpec, generate_sequence
from harness.adapter.session import open_tree
from harness.vllm_tree.tree import VllmTree
from suites.adapter.conftest import ERA034, copy_tree

STEPS = 60


def _values(snapshot: dict[str, Any]) -> Any:
    return snapshot["values"]


def _check_rows(metadata: dict[str, Any], block_size: int) -> list[int]:
    """Slot mapping, seq lens and pages agree with the block table; returns query lengths."""
    qsl = _values(metadata["query_start_loc"])
    seq_lens = _values(metadata["seq_lens"])
    table = _values(metadata["block_table"])
    slots = _values(metadata["slot_mapping"])
    query_lens = [b - a for a, b in itertools.pairwise(qsl)]
    expected = [
        table[r][p // block_size] * block_size + p % block_size
        for r, (n, q) in enumerate(zip(seq_lens, query_lens, strict=True))
        for p in range(n - q, n)
    ]
    assert slots == expected
    assert metadata["num_pages"] == sum(-(n // -block_size) for n in seq_lens)
    assert metadata["num_actual_tokens"] == qsl[-1] == len(slots)
    return query_lens


def test_vllm_0_9_builders_take_the_runner_and_reorder_the_batch(era09: VllmTree) -> None:
    record = record_job(era09, PlatformOptions(), "FLASH_ATTN", STEPS, 0)
    run = record["run"]
    assert (run["era"], run["reorder"], run["steps_run"]) == (
        "RUNNER",
        "ToyMetadataBuilder.reorder_batch",
        STEPS,
    )
    assert any(step["swaps"] for step in record["steps"])
    for step in record["steps"]:
        assert step["error"] is None
        metadata = step["metadata"]["metadata"]
        query_lens = _check_rows(metadata, run["block_size"])
        decodes = metadata["num_decodes"]
        assert all(q == 1 for q in query_lens[:decodes])
        assert all(q > 1 for q in query_lens[decodes:])


def test_vllm_0_34_builders_take_the_config_and_the_runner_sorts(era034: VllmTree) -> None:
    record = record_job(era034, PlatformOptions(), "FLASH_ATTN", STEPS, 0)
    run = record["run"]
    assert run["era"] == "SPEC" and run["reorder"].startswith("sort_batch_req_ids")
    for step in record["steps"]:
        metadata = step["metadata"]["metadata"]
        query_lens = _check_rows(metadata, run["block_size"])
        key = [(q != 1, q) for q in query_lens]
        assert key == sorted(key)  # decodes first, then by length, as the tree's own sort


def test_a_triton_kernel_inside_build_runs_under_the_interpreter(era034: VllmTree) -> None:
    pytest.importorskip("triton", reason="the triton extra runs Triton kernels (make install)")
    record = record_job(era034, PlatformOptions(), "TRITON_ATTN", 20, 0)
    for step in record["steps"]:
        assert step["error"] is None
        metadata = step["metadata"]["metadata"]
        table = _values(metadata["block_table"])
        pages = [-(n // -16) for n in _values(metadata["seq_lens"])]
        expected = [b for row, n in zip(table, pages, strict=True) for b in row[:n]]
        assert _values(metadata["page_indices"]) == expected


def test_without_triton_the_kernel_launch_names_the_extra(
    era034: VllmTree, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stubs, "triton_available", lambda: False)
    record = record_job(era034, PlatformOptions(), "TRITON_ATTN", 5, 0)
    error = record["steps"][0]["error"]
    assert error["type"] == "TritonMissing"
    assert "_copy_rows_kernel" in error["message"]
    assert "attn-metadata-harness[triton]" in error["message"]


def test_a_stubbed_kernel_called_in_build_is_named_with_its_line(era09: VllmTree) -> None:
    record = record_job(era09, PlatformOptions(), "FLASHINFER", 5, 0)
    error = record["steps"][0]["error"]
    assert error["type"] == "StubUsed"
    assert "vllm._custom_ops.get_scheduler_metadata" in error["message"]
    assert error["where"] == "vllm/v1/attention/backends/kernel.py:9"


def test_sys_exit_in_the_trees_build_is_an_error_not_an_exit(tmp_path: Path) -> None:
    tree = copy_tree(ERA034, tmp_path)
    toy = tree.root / "vllm/v1/attention/backends/toy.py"
    text = toy.read_text()
    toy.write_text(
        text.replace("        m = common_attn_metadata\n", "        raise SystemExit(0)\n", 1)
    )
    record = record_job(tree, PlatformOptions(), "FLASH_ATTN", 5, 0)
    error = record["steps"][0]["error"]
    assert error["type"] == "SystemExit"
    assert error["where"].startswith("vllm/v1/attention/backends/toy.py:")


def test_config_defaults_come_from_the_trees_own_class_source(tmp_path: Path) -> None:
    tree = copy_tree(ERA034, tmp_path)
    config = tree.root / "vllm/config/attention.py"
    config.write_text(config.read_text().replace("4096", "7"))
    with open_tree(tree, PlatformOptions()) as session:
        driver = BackendDriver(session, discover_backends(tree)[0], DriveOptions())
        driver.setup(generate_sequence(SequenceSpec(num_steps=2)), lambda name: nullcontext())
        assert driver.builder.page_budget == 7  # AttentionConfig.toy_page_budget, edited
        assert driver.vllm_config.cache_config.num_gpu_blocks == 64  # the sequence's pool
        mode = driver.vllm_config.compilation_config.cudagraph_mode
        assert mode.name == "NONE"  # the tree's own CUDAGraphMode: eager


def test_a_config_field_the_adapter_does_not_set_is_named(tmp_path: Path) -> None:
    tree = copy_tree(ERA034, tmp_path)
    toy = tree.root / "vllm/v1/attention/backends/toy.py"
    toy.write_text(
        toy.read_text().replace(
            "        self.page_budget =",
            "        vllm_config.model_config.no_such_field\n        self.page_budget =",
        )
    )
    rows = list_job(tree, PlatformOptions(), ["FLASH_ATTN"], 2, 0)
    assert rows[0]["status"] == "stops"
    assert "vllm_config.model_config.no_such_field" in rows[0]["cause"]


def test_platform_capability_is_parsed_and_checked() -> None:
    assert parse_capability("10.0") == (10, 0)
    with pytest.raises(ValueError, match=r"expected MAJOR\.MINOR"):
        parse_capability("sm90")
    with pytest.raises(ValueError, match="is not 2, 3 or 4"):
        PlatformOptions(flash_attn_version=5)


def test_a_builder_of_neither_era_stops_with_both_signatures_named(tmp_path: Path) -> None:
    tree = copy_tree(ERA034, tmp_path)
    toy = tree.root / "vllm/v1/attention/backends/toy.py"
    toy.write_text(
        toy.read_text().replace(
            "    def __init__(self, kv_cache_spec, layer_names, vllm_config: VllmConfig, device):",
            "    def __init__(self, spec, names, vllm_config: VllmConfig, device):",
        )
    )
    [row] = list_job(tree, PlatformOptions(), ["FLASH_ATTN"], 2, 0)
    assert row["status"] == "stops"
    assert "__init__(spec, names, vllm_config, device)" in row["cause"]
    assert "match neither supported era" in row["cause"]
