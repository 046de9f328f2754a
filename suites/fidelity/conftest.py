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
