"""Option ``--memory-fail-on-increase`` / ini ``memory_fail_on_increase``: last green run."""

from __future__ import annotations

import pytest
from plugin_support import (
    GROWING_TEST,
    _import_lazy_torch_modules,  # noqa: F401  # pyright: ignore[reportUnusedImport]
    run_growing,
)

SECTION = "*memory peaks worse than the last green run*"


def test_a_worse_peak_is_reported_but_passes_by_default(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_grow=GROWING_TEST)
    first = run_growing(pytester, 1000)
    first.assert_outcomes(passed=1)
    assert "worse than the last green run" not in first.stdout.str()
    second = run_growing(pytester, 2000)
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(
        [
            SECTION,
            "test_grow.py::test_grows: peak 7.81 KiB is worse than the last green run's 3.91 KiB "
            "(x2.000, +3.91 KiB)",
        ]
    )
    third = run_growing(pytester, 2000)  # the second run was green: it is the new baseline
    assert "worse than the last green run" not in third.stdout.str()


def test_option_fails_and_keeps_the_old_baseline(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_grow=GROWING_TEST)
    run_growing(pytester, 1000).assert_outcomes(passed=1)
    failed = run_growing(pytester, 1500, "--memory-fail-on-increase")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["memory peak increased: peak 5.86 KiB is worse than*3.91 KiB*"])
    again = run_growing(pytester, 1500, "--memory-fail-on-increase")
    again.assert_outcomes(failed=1)  # a failing run did not become the baseline
    run_growing(pytester, 1000, "--memory-fail-on-increase").assert_outcomes(passed=1)


def test_ini_twin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_grow=GROWING_TEST)
    pytester.makeini("[pytest]\nmemory_fail_on_increase = true\n")
    run_growing(pytester, 1000).assert_outcomes(passed=1)
    run_growing(pytester, 1001).assert_outcomes(failed=1)


def test_over_budget_runs_do_not_touch_the_baseline(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_grow=GROWING_TEST)
    run_growing(pytester, 1000).assert_outcomes(passed=1)
    run_growing(pytester, 1 << 20).assert_outcomes(failed=1)  # 4 MiB > the 1 MiB budget
    run_growing(pytester, 1000, "--memory-fail-on-increase").assert_outcomes(passed=1)
