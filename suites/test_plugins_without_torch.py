"""Both entry-point plugins load without torch and numpy, and stay out of the way there."""

from __future__ import annotations

import pytest

from harness.golden import GoldenStore

BLOCK_TORCH = """
import sys

for name in ("torch", "numpy"):
    sys.modules[name] = None  # any import of them now raises ImportError
"""
"""Loaded with ``-p`` (before entry-point plugins): a Python where torch and numpy cannot import."""

LIGHT_TESTS = """
import pytest

def test_plain():
    pass

def test_golden(golden):
    golden.check("light", {"a": 1})

@pytest.mark.memory_budget(peak="1 KiB")
def test_budgeted():
    pass

def test_tracker(harness_memory_tracker):
    pass

def test_simulate(harness_simulate):
    pass

def test_torch_is_blocked():
    with pytest.raises(ImportError):
        import torch
"""


def test_both_plugins_load_and_stay_inert_without_torch(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(block_torch=BLOCK_TORCH, test_light=LIGHT_TESTS)
    pytester.makeini("[pytest]\ngolden_root = golden\n")
    GoldenStore(pytester.path / "golden", update=True).check(
        "light", {"a": 1}, test="test_light.py::test_golden"
    )
    result = pytester.runpytest_subprocess("-p", "block_torch", "-p", "no:hypothesispytest")
    result.assert_outcomes(passed=3, failed=1, errors=2)
    hint = "needs torch, which is not importable (*): pip install 'attn-metadata-harness?engine?'"
    result.stdout.fnmatch_lines([f"*memory_budget {hint}"])
    result.stdout.fnmatch_lines([f"*harness_memory_tracker {hint}"])
    result.stdout.fnmatch_lines([f"*harness_simulate {hint}"])
    assert "Traceback" not in result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
