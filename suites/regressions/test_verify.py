"""Every catalog entry verified: each check fails on buggy and passes on fixed, for the right reason."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from harness.regressions import REGRESSIONS, Check, CheckOutcome, Variant, get_regression
from harness.regressions.verify import VerifyResult, verify

from .variants import entry, exits, exits_in_a_thread, exits_zero, raises

EXPECTED_DETAIL = {  # (id, check, role): what the check must have said
    (
        "aiter-build-decode-rename",
        "overrides",
        "buggy",
    ): r"renames parameter 'block_table_tensor'.*\n"
    r"  call: harness/reference/backends/mla/common.py:\d+: decode_metadata = self._build_decode",
    (
        "aiter-build-decode-rename",
        "mixed-build",
        "buggy",
    ): r"TypeError: .*unexpected keyword argument "
    r"'block_table_tensor'",
    (
        "flashinfer-global-config",
        "plan-parameters",
        "buggy",
    ): r"\(4, 0.125, -1\), the served model needs "
    r"\(8, 0.0883\d+, 7\); 2 read\(s\) of the global config",
    (
        "flashinfer-oom",
        "simulate:h100-95",
        "buggy",
    ): r"num_blocks 34757: out of memory at step 0: CUDA out "
    r"of memory. Tried to allocate 2.12 GiB",
    # Bounded, it still proves OOM-versus-completes: step 0, at the sizing both runs share.
    ("flashinfer-oom", "simulate:h100-95", "fixed"): r"^num_blocks 34757: 1 steps fit",
    ("flashinfer-oom", "scaling", "buggy"): r"\d+ bytes/block  aten.clone.default .* in step 0",
    (
        "aiter-mla-last-page-len",
        "decode-pages",
        "buggy",
    ): r"the pages describe \[17, 10, 12, 3\] tokens, "
    r"the requests hold \[9, 6, 8, 3\]",
    (
        "cascade-prefix-schedule",
        "cascade",
        "buggy",
    ): r"RuntimeError: scheduler_metadata must have shape",
    (
        "dummy-run-null-block",
        "dummy-run-writes",
        "buggy",
    ): r"blocks \[0\].*\(block 0 is the null block\)",
}


@pytest.mark.parametrize("regression_id", sorted(REGRESSIONS))
def test_entry_behaves(regression_id: str) -> None:
    (result,) = verify([get_regression(regression_id)])
    failures = [
        f"{r.role} {r.check}: {r.verdict} {r.error or ''}" for r in result.runs if not r.as_expected
    ]
    assert result.ok and result.buggy_detected and result.fixed_clean, failures
    for run in result.runs:
        assert run.outcome is not None
        pattern = EXPECTED_DETAIL.get((regression_id, run.check, run.role))
        if pattern is not None:
            assert re.search(pattern, run.outcome.detail, re.DOTALL), run.outcome.detail


def test_a_check_that_raises_is_an_error_never_a_find() -> None:
    (result,) = verify([entry("raises", Check("boom", "cannot run", raises))])
    assert not result.ok and result.buggy_detected is False and result.fixed_clean is False
    assert {r.verdict for r in result.runs} == {"error"}
    assert all("RuntimeError: internal error while checking" in str(r.error) for r in result.runs)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("check", [exits, exits_zero, exits_in_a_thread])
def test_a_check_that_calls_sys_exit_is_an_error_and_the_run_goes_on(
    check: Callable[[Variant], CheckOutcome],
) -> None:
    """``sys.exit()`` inside a check (any status, any thread) is that check's error, never the
    run's end (a thread's is silent in Python: issue 27, bug 1)."""
    (result, after) = verify(
        [entry("exits", Check("exit", "ends the process", check)), entry("after")]
    )
    assert {r.verdict for r in result.runs} == {"error"} and not result.ok
    assert all("SystemExit" in str(r.error) and "sys.exit" in str(r.error) for r in result.runs)
    assert len(after.runs) == 2 and after.fixed_clean  # the entries after it still ran


def test_a_check_that_misses_the_buggy_variant_misbehaves() -> None:
    (result,) = verify([entry("misses")])
    assert result.buggy_detected is False and result.fixed_clean is True and not result.ok


def test_json_shape() -> None:
    (result,) = verify([get_regression("aiter-mla-last-page-len")])
    data = result.to_dict()
    assert isinstance(result, VerifyResult)
    assert {"id", "buggy_detected", "fixed_clean", "seconds", "checks"} <= set(data)
    assert data["checks"][0]["variant"] == "buggy" and data["checks"][0]["verdict"] == "FAIL"
