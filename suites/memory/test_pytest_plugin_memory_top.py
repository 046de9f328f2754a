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


@pytest.mark.parametrize(
    ("ini", "args", "says"),
    [
        ("memory_top = abc", (), "memory_top: expected a positive integer, got 'abc'"),
        ("memory_top = 0", (), "memory_top: expected a positive integer, got '0'"),
        ("", ("--memory-top=-2",), "--memory-top: expected a positive integer, got '-2'"),
        ("memory_increase_tolerance = lots", (), "memory_increase_tolerance: expected a number"),
        ("memory_increase_tolerance = nan", (), "memory_increase_tolerance: expected a number"),
        ("memory_increase_tolerance = -0.5", (), "memory_increase_tolerance: expected a number"),
    ],
)
def test_a_bad_setting_is_one_usage_error_before_any_test(
    pytester: pytest.Pytester, ini: str, args: tuple[str, ...], says: str
) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(THREE_TENSORS)
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert says in result.stderr.str(), result.stderr.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
