"""Option ``--memory-top`` / ini ``memory_top``: how many allocations a failing budget lists."""

from __future__ import annotations

import pytest
from plugin_support import _import_lazy_torch_modules  # noqa: F401  # pyright: ignore[reportUnusedImport]

THREE_TENSORS = """
import pytest
import torch

@pytest.mark.memory_budget(peak="1 KiB")
def test_three():
    a = torch.ones(1000)
    b = torch.ones(2000)
    c = torch.ones(3000)
"""


def _listed(result: pytest.RunResult) -> int:
    return sum(" aten.ones.default " in line for line in result.outlines)


def test_default_lists_all_three(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(THREE_TENSORS)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    assert _listed(result) == 3


def test_option_limits_the_list_to_the_largest(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(THREE_TENSORS)
    result = pytester.runpytest("--memory-top=1")
    result.assert_outcomes(failed=1)
    assert _listed(result) == 1
    result.stdout.fnmatch_lines(["*11.72 KiB  aten.ones.default*:8"])


def test_ini_twin_and_option_wins_over_ini(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(THREE_TENSORS)
    pytester.makeini("[pytest]\nmemory_top = 2\n")
    assert _listed(pytester.runpytest()) == 2
    assert _listed(pytester.runpytest("--memory-top=1")) == 1
