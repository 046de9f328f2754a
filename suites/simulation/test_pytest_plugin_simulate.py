"""Fixture ``harness_simulate``: a user's test runs a variant through simulate, inside a budget."""

from __future__ import annotations

import pytest

VARIANT_TEST = """
import pytest
import torch

from harness.regressions.flashinfer_oom import FlashInferOOMBackend


class MyBackend(FlashInferOOMBackend):
    '''A variant written in the user's own test module.'''


@pytest.mark.memory_budget(peak="8 MiB", device="meta:h100-95")
def test_variant(harness_simulate):
    result = harness_simulate(MyBackend, model="tiny", device="h100-95", workload="tiny")
    body = torch.empty(2**20)  # after the simulation the budget is back: meta, tracked
    assert body.device.type == "meta"
    assert result.completed, "out of memory"
"""


@pytest.fixture(autouse=True, scope="module")
def _import_what_simulate_imports() -> None:
    """Simulate once here: an in-process pytester run would drop (and re-import) the ~800 torch
    modules a first meta forward imports lazily."""
    from harness.simulation.simulate import simulate
    from harness.simulation.workload import tiny

    simulate(model="tiny", device="h100-95", workload=tiny(num_requests=1), max_steps=0)


def test_a_variant_runs_through_simulate_inside_a_meta_budget(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_variant=VARIANT_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E       AssertionError: out of memory",
            "*- memory budget -*",  # the body's own peak: the simulation stepped outside it
            "peak 4.00 MiB on meta:h100-95*",
            "*4.00 MiB  aten.empty.memory_format ?1048576 float32 meta? at test_variant.py:14",
            "*- harness simulate #1: test_variant:MyBackend -*",
            "tiny on h100-95 *",
            "OUT OF MEMORY at step 0 (0 steps completed):",
            "  CUDA out of memory. Tried to allocate 42.50 GiB.*",
        ]
    )
