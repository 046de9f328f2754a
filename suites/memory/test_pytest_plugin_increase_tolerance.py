"""Option ``--memory-increase-tolerance`` / ini ``memory_increase_tolerance``."""

from __future__ import annotations

import pytest
from plugin_support import (
    GROWING_TEST,
    _import_lazy_torch_modules,  # noqa: F401  # pyright: ignore[reportUnusedImport]
    run_growing,
)


def test_increase_within_tolerance_is_fine(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_grow=GROWING_TEST)
    run_growing(pytester, 1000).assert_outcomes(passed=1)
    args = ("--memory-fail-on-increase", "--memory-increase-tolerance=0.10")
    run_growing(pytester, 1100, *args).assert_outcomes(passed=1)
    run_growing(pytester, 1211, *args).assert_outcomes(failed=1)  # > 1100 * 1.10


def test_ini_twin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_grow=GROWING_TEST)
    pytester.makeini("[pytest]\nmemory_increase_tolerance = 0.5\nmemory_fail_on_increase = true\n")
    run_growing(pytester, 1000).assert_outcomes(passed=1)
    run_growing(pytester, 1500).assert_outcomes(passed=1)
    run_growing(pytester, 2251).assert_outcomes(failed=1)
