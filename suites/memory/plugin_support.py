"""Shared setup for the pytester tests of harness.memory.pytest_plugin."""

from __future__ import annotations

import hypothesis  # noqa: F401  # imported here once: each in-process pytester run would re-import it (3 s)
import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _import_lazy_torch_modules() -> None:
    """Run the tracker once in this process before pytester snapshots ``sys.modules``.

    A dispatch mode imports parts of torch lazily (torch._dynamo, torch._inductor); in-process
    pytester runs drop modules imported during a run, and importing those twice fails.
    """
    from harness.memory.ledger import Ledger
    from harness.memory.sim_allocator import SimulatedDevice
    from harness.memory.tracker import MemoryTracker

    with MemoryTracker(Ledger(capacity=SimulatedDevice("h100-95")), devices=("cpu", "meta")):
        torch.ones(2, 2).t().contiguous()


GROWING_TEST = """
import pathlib

import hypothesis  # noqa: F401  # imported here once: each in-process pytester run would re-import it (3 s)
import pytest
import torch

@pytest.mark.memory_budget(peak="1 MiB")
def test_grows():
    n = int(pathlib.Path(__file__).with_name("numel.txt").read_text())
    x = torch.ones(n)
"""
"""A budgeted test whose peak is ``numel.txt`` float32 elements (4 bytes each)."""


def run_growing(pytester: pytest.Pytester, numel: int, *args: str) -> pytest.RunResult:
    """Run ``GROWING_TEST`` with ``numel`` elements (same cache dir across calls)."""
    pytester.path.joinpath("numel.txt").write_text(str(numel))
    return pytester.runpytest(*args)
