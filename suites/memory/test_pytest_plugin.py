"""harness.memory.pytest_plugin through pytester: the memory_budget marker end to end."""

from __future__ import annotations

import pytest
from plugin_support import _import_lazy_torch_modules  # noqa: F401  # pyright: ignore[reportUnusedImport]


def test_help_lists_one_option_group_with_ini_twins(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "memory budgets (harness.memory):",
            "  --memory-top=MEMORY_TOP",
            "*allocations live at the peak to list*",
            "  --memory-fail-on-increase",
            "  --memory-increase-tolerance=MEMORY_INCREASE_TOLERANCE",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "  memory_top (string):*default for --memory-top",
            "  memory_fail_on_increase (bool):",
            "*default for --memory-fail-on-increase",
            "  memory_increase_tolerance (string):",
            "*default for --memory-increase-tolerance",
        ]
    )


def test_marker_help_comes_from_the_function_signature(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(
        ["@pytest.mark.memory_budget(peak, device='cpu'): Fail when the test body's peak*"]
    )


def test_cpu_budget_passes_and_fails_with_the_allocations_at_the_peak(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_budget="""
        import pytest
        import torch

        @pytest.mark.memory_budget(peak="64 KiB", device="cpu")
        def test_small():
            a = torch.ones(1000)
            b = a * 2

        @pytest.mark.memory_budget(peak="64 KiB")
        def test_big():
            a = torch.ones(1000)
            big = torch.ones(100, 100).t().contiguous()
            del big
            c = torch.zeros(10)
        """
    )
    result = pytester.runpytest("--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*memory budget exceeded on cpu: peak 82.03 KiB (84000 bytes) > budget 64.00 KiB "
            "(65536 bytes) by 18.03 KiB",
            "*- memory budget -*",
            "peak 82.03 KiB on cpu (measured by tracker (live storage bytes))",
            "largest allocations live at the peak (top 3):",
            "*39.06 KiB  aten.* ?100x100 float32 cpu? at test_budget.py:12",
            "*big = torch.ones(100, 100).t().contiguous()",
            "*3.91 KiB  aten.ones.default ?1000 float32 cpu? at test_budget.py:11",
            "*a = torch.ones(1000)",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_unittest_method_is_held_to_its_budget(pytester: pytest.Pytester) -> None:
    """A ``unittest.TestCase`` method runs outside ``pytest_pyfunc_call``: its budget was
    ignored, 64 MiB passing a 1 MiB budget (issue 27, bug 4)."""
    pytester.makepyfile(
        test_unit="""
        import unittest

        import pytest
        import torch

        class TestBudgets(unittest.TestCase):
            @pytest.mark.memory_budget(peak="1 MiB")
            def test_big(self):
                x = torch.ones(16 << 20)

            @pytest.mark.memory_budget(peak="1 MiB", device="meta:h100-95")
            def test_small_on_meta(self):
                x = torch.ones(16)
                self.assertEqual(x.device.type, "meta")

            @pytest.mark.memory_budget(peak="1 MiB")
            def test_fails_itself(self):
                x = torch.ones(16 << 20)
                self.fail("the body's own failure")
        """
    )
    result = pytester.runpytest("--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*memory budget exceeded on cpu: peak 64.00 MiB (67108864 bytes) > budget 1024.00 KiB*",
            "*aten.ones.default ?16777216 float32 cpu? at test_unit.py:*",
        ]
    )
    assert "the body's own failure" in result.stdout.str()


def test_fixture_allocations_are_outside_the_budget(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import torch

        @pytest.fixture
        def weights():
            return torch.ones(1 << 20)

        @pytest.mark.memory_budget(peak="1 KiB")
        def test_uses_weights(weights):
            assert weights.sum().item() == 1 << 20
        """
    )
    pytester.runpytest("--strict-markers").assert_outcomes(passed=1)


def test_meta_budget_runs_the_body_on_meta_against_a_simulated_gpu(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_meta="""
        import pytest
        import torch

        @pytest.mark.memory_budget(peak="8 GiB", device="meta:h100-95")
        def test_fits():
            kv = torch.empty(4 << 30, dtype=torch.bfloat16)
            assert kv.device.type == "meta"

        @pytest.mark.memory_budget(peak="8 GiB", device="meta:h100-95")
        def test_over_budget():
            kv = torch.empty(5 << 30, dtype=torch.bfloat16)

        @pytest.mark.memory_budget(peak="200 GiB", device="meta:h100-95")
        def test_out_of_memory():
            weights = torch.empty(44 << 30, dtype=torch.bfloat16)
            kv = torch.empty(5 << 30, dtype=torch.bfloat16)
        """
    )
    result = pytester.runpytest("--strict-markers")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*memory budget exceeded on meta:h100-95: peak 10.00 GiB*",
            "*10.00 GiB  aten.empty.memory_format ?5368709120 bfloat16 meta? at test_meta.py:11",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "E   *OutOfMemoryError: CUDA out of memory. Tried to allocate 10.00 GiB. GPU 0 has a "
            "total capacity of 95.00 GiB of which 6.50 GiB is free.*",
            "E*simulated on h100-95: aten.empty.memory_format allocating 10.00 GiB*",
            "E*at test_meta.py:16: kv = torch.empty(5 << 30, dtype=torch.bfloat16)",
            "*- memory budget -*",
            "peak 88.00 GiB on meta:h100-95*",
            "*88.00 GiB  aten.empty.memory_format ?47244640256 bfloat16 meta? at test_meta.py:15",
        ]
    )


def test_cuda_budget_skips_with_a_reason_without_cuda(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        import torch

        @pytest.mark.memory_budget(peak="1 KiB", device="cuda")
        def test_on_gpu():
            torch.ones(1 << 20)  # would pass a budget measured as 0 bytes
        """
    )
    result = pytester.runpytest("--strict-markers", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*memory_budget(device='cuda') needs a GPU: *"])


BAD_MARKERS = {
    "bad_device": (
        'peak="1 KiB", device="gpu"',
        "invalid memory_budget device 'gpu'*'meta:<profile>'*",
    ),
    "bad_profile": (
        'peak="1 KiB", device="meta:h100-96"',
        "unknown device profile 'h100-96' (available:*",
    ),
    "bad_size": ('peak="64 MiBs"', "invalid size '64 MiBs'*"),
    "no_peak": ('device="cpu"', "memory_budget needs a peak*"),
    "unknown_argument": (
        'peak="1 KiB", colour="red"',
        "invalid memory_budget arguments: unknown 'colour' (memory_budget takes peak, device)",
    ),
    "private_argument": (
        'peak="1 KiB", _measurement=None',
        "invalid memory_budget arguments: unknown '_measurement' (memory_budget takes peak, device)",
    ),
    "positional": ('"1 KiB", "cpu", 3', "invalid memory_budget arguments: 3 positional*"),
    "twice": ('"1 KiB", peak="2 KiB"', "invalid memory_budget arguments: 'peak' given twice"),
}


def test_bad_marker_arguments_fail_that_test_cleanly(pytester: pytest.Pytester) -> None:
    source = ["import pytest"]
    for name, (marker, _) in BAD_MARKERS.items():
        source += ["", f"@pytest.mark.memory_budget({marker})", f"def test_{name}():", "    pass"]
    source += ["", "def test_the_session_goes_on():", "    pass"]
    pytester.makepyfile("\n".join(source))
    result = pytester.runpytest()
    result.assert_outcomes(failed=len(BAD_MARKERS), passed=1)
    for name, (_, message) in BAD_MARKERS.items():
        result.stdout.fnmatch_lines([f"*_ test_{name} _*", message])
    assert "Traceback" not in result.stdout.str()


def test_memory_tracker_fixture_measures_a_region_and_reports_on_failure(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_fixture="""
        import torch

        def test_region(harness_memory_tracker):
            tracker = harness_memory_tracker
            with tracker, tracker.ledger.region("build"):
                x = torch.empty(256, device="meta")
            assert tracker.ledger.region_stats("build").peak_bytes == 1024

        def test_fails(harness_memory_tracker):
            with harness_memory_tracker:
                x = torch.empty(2048)
            assert harness_memory_tracker.ledger.peak_bytes < 1024
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- memory tracker -*",
            "peak 8.00 KiB (8192 bytes)*",
            "*aten.empty.memory_format ?2048 float32 cpu? at test_fixture.py:11",
        ]
    )


@pytest.mark.integration  # a nested pytest -n 1 run; the in-process pytester tests cover the rest
def test_works_under_xdist(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_x="""
        import pytest
        import torch

        @pytest.mark.memory_budget(peak="1 KiB")
        def test_big():
            x = torch.ones(1024)

        @pytest.mark.memory_budget(peak="1 MiB")
        def test_small():
            x = torch.ones(16)
        """
    )
    result = pytester.runpytest_subprocess(
        "-n", "1", "-p", "no:hypothesispytest", "--strict-markers"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*memory budget exceeded on cpu: peak 4.00 KiB*",
            "*aten.ones.default ?1024 float32 cpu? at test_x.py:6",
        ]
    )
