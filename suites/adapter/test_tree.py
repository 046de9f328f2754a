"""Locating a vLLM tree: the directory holding vllm/, or vllm/ itself; clear refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.adapter.tree import locate_tree
from harness.errors import HarnessError
from suites.adapter.conftest import ERA034, ERA09


def test_the_root_and_the_package_directory_are_both_accepted() -> None:
    assert locate_tree(ERA034).root == ERA034.resolve()
    assert locate_tree(ERA034 / "vllm").root == ERA034.resolve()
    assert locate_tree(ERA09).version == "0.9.0+fixture"
    assert locate_tree(ERA034).version == "0.34.0+fixture"


def test_a_missing_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"--vllm-src .*nope: no such directory"):
        locate_tree(tmp_path / "nope")


def test_a_directory_without_vllm_says_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="no vllm/ directory here; give the directory that"):
        locate_tree(tmp_path, "--base")


def test_a_vllm_package_without_v1_attention_is_outside_both_eras(tmp_path: Path) -> None:
    (tmp_path / "vllm").mkdir()
    with pytest.raises(HarnessError, match=r"no vllm/v1/kv_cache_interface.py.*0\.9 and later"):
        locate_tree(tmp_path)
