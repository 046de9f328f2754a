"""``harness diff``'s comparison: the first step, field and both values; crashes on one side."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from harness.adapter.diff import compare_records, first_difference
from harness.adapter.jobs import record_job
from harness.adapter.platform import PlatformOptions
from harness.vllm_tree.tree import VllmTree
from suites.adapter.conftest import ERA034, copy_tree

HELPER = (
    "    def _decode_count(self, query_lens):\n"
    "        return int((query_lens == 1).sum())\n\n"
    "    def build(self, common_prefix_len"
)


def _with_helper(tree: VllmTree, parameter: str) -> None:
    """Builders that call a helper by keyword (``query_lens=``); the helper names its parameter
    ``parameter`` (a rename on one side is the seed's bug class)."""
    path = tree.root / "vllm/v1/attention/backends/toy.py"
    text = path.read_text()
    text = text.replace(
        "    def build(self, common_prefix_len",
        HELPER.replace("query_lens)", f"{parameter})").replace(
            "(query_lens ==", f"({parameter} =="
        ),
        1,
    )
    text = text.replace(
        "        num_decodes = int((query_lens == 1).sum())",
        "        num_decodes = self._decode_count(query_lens=query_lens)",
    )
    path.write_text(text)


def _record(tree: VllmTree, steps: int = 30) -> dict[str, Any]:
    return record_job(tree, PlatformOptions(), "FLASH_ATTN", steps, 0)


def test_a_tree_against_itself_is_the_same(era034: VllmTree) -> None:
    result = compare_records("FLASH_ATTN", _record(era034), _record(era034))
    assert result.difference is None and result.steps == 30
    assert result.format() == "FLASH_ATTN: same over 30 steps"


def test_a_renamed_keyword_fails_with_the_type_error_at_the_bases_call(tmp_path: Path) -> None:
    base = copy_tree(ERA034, tmp_path / "base")
    head = copy_tree(ERA034, tmp_path / "head")
    _with_helper(base, "query_lens")
    _with_helper(head, "query_lengths")
    result = compare_records("FLASH_ATTN", _record(base), _record(head))
    difference = result.difference
    assert difference is not None
    assert (difference.step, difference.field, difference.base) == (0, "exception", "no exception")
    assert difference.head.startswith(
        "TypeError: ToyMetadataBuilder._decode_count() got an unexpected keyword argument "
        "'query_lens' (raised at vllm/v1/attention/backends/toy.py:"
    )


def test_a_changed_value_names_step_field_and_both_values(tmp_path: Path) -> None:
    base = copy_tree(ERA034, tmp_path / "base")
    head = copy_tree(ERA034, tmp_path / "head")
    path = head.root / "vllm/v1/attention/backends/toy.py"
    path.write_text(
        path.read_text().replace(
            "num_pages=sum(pages),", "num_pages=sum(pages) + (m.num_reqs > 5),"
        )
    )
    result = compare_records("FLASH_ATTN", _record(base), _record(head))
    difference = result.difference
    assert difference is not None and difference.field == "metadata.metadata.num_pages"
    assert int(difference.head) == int(difference.base) + 1
    assert (
        f"first difference at step {difference.step}, metadata.metadata.num_pages"
        in result.format()
    )


def test_first_difference_walks_in_order_and_compares_lengths() -> None:
    assert first_difference({"a": [1, 2], "b": 3}, {"a": [1, 2], "b": 3}, "m") is None
    assert first_difference({"a": [1, 2]}, {"a": [1, 5]}, "m") == ("m.a[1]", 2, 5)
    assert first_difference({"a": [1]}, {"a": [1, 2]}, "m") == ("m.a (length)", 1, 2)
    assert first_difference({"a": 1}, {"b": 1}, "m") == ("m.a", 1, "<absent>")
    assert first_difference([math.nan], [math.nan], "m") is None


def test_one_side_that_cannot_be_set_up_is_a_difference() -> None:
    ok = {"run": {"notes": []}, "steps": []}
    result = compare_records("X", ok, {"unavailable": "X: importing x stops it: boom"})
    assert result.difference is not None and result.difference.field == "set-up"
    assert result.difference.head == "X: importing x stops it: boom"
    both = compare_records("X", {"unavailable": "same"}, {"unavailable": "same"})
    assert both.difference is None and both.not_run == "both trees: same"


def test_a_side_whose_child_the_trees_code_ended_is_an_error() -> None:
    """Both sides ended by ``os._exit`` at the same step was 'not compared: both trees', exit 0."""
    ok = {"run": {"notes": []}, "steps": []}
    ended = {"error": "X on the head tree: the process exited with status 0 before returning"}
    result = compare_records("X", ok, ended)
    assert result.error == f"head: {ended['error']}" and result.difference is None
    both = compare_records("X", ended, ended)
    assert both.error is not None and both.error.startswith("base: X on the head tree")
    assert both.format().startswith("X: ERROR: base: ")
