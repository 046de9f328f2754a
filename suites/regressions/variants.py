"""Variants the tests write as a user would: outside the catalog, built on the public API."""

from __future__ import annotations

from harness.reference.backends.flashinfer import FlashInferBackend
from harness.regressions import Check, CheckOutcome, Regression, Upstream, Variant


def never_fires(variant: Variant) -> CheckOutcome:
    """A check that finds nothing, whatever it runs."""
    return CheckOutcome(False, f"looked at {variant.label}")


def raises(variant: Variant) -> CheckOutcome:
    """A check that cannot run."""
    raise RuntimeError(f"internal error while checking {variant.label}")


def entry(regression_id: str, *checks: Check) -> Regression:
    """An entry whose variants are both the reference FlashInfer backend."""
    return Regression(
        id=regression_id,
        title="a test entry",
        upstream=(Upstream("issue", 1, "reported in"),),
        bug_class="test",
        component="nothing",
        buggy=Variant(FlashInferBackend),
        fixed=Variant(FlashInferBackend),
        checks=checks or (Check("never", "finds nothing", never_fires),),
        found_upstream="n/a",
        caught_by="n/a",
    )
