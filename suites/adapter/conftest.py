"""Fixtures: small vLLM trees in each API era's layout (our own code, never vLLM's), and copies
of them a test may edit."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.vllm_tree.tree import VllmTree, locate_tree

FIXTURES = Path(__file__).parent / "fixtures"
ERA09 = FIXTURES / "vllm09"
"""Builders take the runner (vLLM 0.9): FLASH_ATTN runs, FLASHINFER calls a stubbed kernel."""
ERA034 = FIXTURES / "vllm034"
"""Builders take the spec and the config (vLLM 0.34): FLASH_ATTN and TRITON_ATTN (a Triton
kernel inside build) run; FLASHMLA's module needs a module the tree lacks."""


@pytest.fixture
def era09() -> VllmTree:
    return locate_tree(ERA09)


@pytest.fixture
def era034() -> VllmTree:
    return locate_tree(ERA034)


def copy_tree(source: Path, target: Path) -> VllmTree:
    """A copy of a fixture tree under ``target`` (to edit)."""
    shutil.copytree(source, target / source.name)
    return locate_tree(target / source.name)
