"""Variants the tests write as a user would: outside the catalog, built on the public API."""

from __future__ import annotations

import sys
from typing import Any

from harness.reference.backends.flashinfer import FlashInferBackend, FlashInferMetadataBuilder
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


def exits(variant: Variant) -> CheckOutcome:
    """A check that ends the interpreter, as a careless user's code may."""
    del variant
    sys.exit(3)


def exits_zero(variant: Variant) -> CheckOutcome:
    """A check that ends the interpreter with status 0."""
    del variant
    sys.exit(0)


def exits_in_a_thread(variant: Variant) -> CheckOutcome:
    """A check whose worker thread calls ``sys.exit(0)``; the check itself then finds nothing."""
    import threading

    worker = threading.Thread(target=sys.exit, args=(0,))
    worker.start()
    worker.join()
    return never_fires(variant)


class ExitingBuilder(FlashInferMetadataBuilder):
    """A builder that ends the interpreter with status 0 the first time it builds."""

    def build(self, *args: Any, **kwargs: Any) -> Any:
        del args, kwargs
        sys.exit(0)


class ExitingBackend(FlashInferBackend):
    """FlashInfer with :class:`ExitingBuilder`."""

    @staticmethod
    def get_builder_cls() -> type[FlashInferMetadataBuilder]:
        return ExitingBuilder


class ThreadExitingBuilder(FlashInferMetadataBuilder):
    """A builder whose worker thread calls ``sys.exit(0)`` (silent in Python) as it builds."""

    def build(self, *args: Any, **kwargs: Any) -> Any:
        import threading

        worker = threading.Thread(target=sys.exit, args=(0,))
        worker.start()
        worker.join()
        return super().build(*args, **kwargs)


class ThreadExitingBackend(FlashInferBackend):
    """FlashInfer with :class:`ThreadExitingBuilder`."""

    @staticmethod
    def get_builder_cls() -> type[FlashInferMetadataBuilder]:
        return ThreadExitingBuilder


def exiting_entry(regression_id: str, *, in_a_thread: bool = False) -> Regression:
    """An entry whose buggy variant calls ``sys.exit(0)`` while it builds metadata."""
    import dataclasses

    backend = ThreadExitingBackend if in_a_thread else ExitingBackend
    return dataclasses.replace(entry(regression_id), buggy=Variant(backend))


EXITING = Variant(ExitingBackend)
"""A variant object, as ``--regression MODULE:ATTR`` may name one."""
