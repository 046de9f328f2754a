"""Fixtures: the fake vLLM source tree (our own small code in vLLM's layout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.vllm_tree.tree import VllmTree, locate_tree
from suites.vllm_tree.conftest import write_tree

__all__ = ["FAKE_MODULES", "FIXTURES", "write_tree"]

FIXTURES = Path(__file__).parent / "fixtures"
FAKE_MODULES = ("vllm.v1.kv_cache_interface", "vllm.v1.worker.block_table")
"""The modules the fake tree implements."""


@pytest.fixture
def fake_vllm() -> VllmTree:
    return locate_tree(FIXTURES / "fake_vllm")
