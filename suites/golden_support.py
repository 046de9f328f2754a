"""A throwaway project that opts in to the golden plugin (ini ``golden_root = golden``)."""

from __future__ import annotations

import json
from pathlib import Path

import hypothesis  # noqa: F401  # imported here once: each in-process pytester run would re-import it
import pytest

TWO_TESTS = """
def test_a(golden):
    golden.check("area/a", {"x": 1})

def test_b(golden):
    golden.check("area/b", {"y": [1, 2]})

def test_plain():
    pass
"""
"""``test_golden.py``: two tests owning one golden file each, one test without goldens."""


def opted_in(pytester: pytest.Pytester, tests: str = TWO_TESTS) -> Path:
    """Write the ini and ``test_golden.py``; return the golden directory."""
    pytester.makeini("[pytest]\ngolden_root = golden\n")
    pytester.makepyfile(test_golden=tests)
    return pytester.path / "golden"


def with_goldens(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``opted_in`` with its golden files written by an update run."""
    monkeypatch.delenv("CI", raising=False)
    root = opted_in(pytester)
    pytester.runpytest("--update-golden").assert_outcomes(passed=3)
    return root


def owner(path: Path) -> str:
    """The node id a golden file records as its owner."""
    return str(json.loads(path.read_text())["header"]["test"])
