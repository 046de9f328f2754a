"""Fixtures: the fake vLLM source tree (our own small code in vLLM's layout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.fidelity.source import VllmSource, locate_vllm_source

FIXTURES = Path(__file__).parent / "fixtures"
FAKE_MODULES = ("vllm.v1.kv_cache_interface", "vllm.v1.worker.block_table")
"""The modules the fake tree implements."""


@pytest.fixture
def fake_vllm() -> VllmSource:
    return locate_vllm_source(FIXTURES / "fake_vllm")


def write_tree(root: Path, files: dict[str, str], version: str = "0.0.0+test") -> VllmSource:
    """A small vLLM-shaped tree under ``root``: ``files`` (path -> text), a version file and the
    ``vllm/v1/kv_cache_interface.py`` that marks a vLLM tree."""
    files = {
        "vllm/_version.py": f"__version__ = {version!r}\n",
        "vllm/v1/kv_cache_interface.py": "",
        **files,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return locate_vllm_source(root)
