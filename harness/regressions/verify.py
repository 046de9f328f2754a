"""Verification: every check must fail on an entry's buggy variant and pass on its fixed one.

``verify([entry, ...])`` runs each check on both variants and returns one
:class:`VerifyResult` per entry; an entry *misbehaves* when a check misses the buggy variant,
flags the fixed one, or raises (an internal error is reported as such, never counted as a find).
A user's backend given as a bare :class:`~harness.regressions.entry.Variant` runs the generic
checks (:func:`~harness.regressions.checks.generic_checks`) once and is *clean* when none fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.child import thread_failures
from harness.errors import describe_error
from harness.regressions.entry import Check, CheckOutcome, Regression, Variant

Role = Literal["buggy", "fixed", "variant"]


@dataclass(frozen=True, slots=True)
class CheckRun:
    """One check on one variant."""

    check: str
    role: Role
    outcome: CheckOutcome | None
    """None when the check raised."""
    error: str | None
    """The exception and where it was raised, when the check could not run."""
    seconds: float

    @property
    def as_expected(self) -> bool:
        """Failed on buggy, passed on fixed or on a user's variant; never an error."""
        if self.outcome is None:
            return False
        return self.outcome.failed if self.role == "buggy" else not self.outcome.failed

    @property
    def verdict(self) -> str:
        if self.outcome is None:
            return "error"
        return "FAIL" if self.outcome.failed else "pass"

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "variant": self.role,
            "verdict": self.verdict,
            "as_expected": self.as_expected,
            "detail": self.error if self.outcome is None else self.outcome.detail,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class VerifyResult:
    """All check runs of one entry (or of one user variant)."""

    id: str
    kind: Literal["entry", "variant"]
    runs: list[CheckRun] = field(default_factory=list[CheckRun])
    seconds: float = 0.0

    def _runs(self, role: Role) -> list[CheckRun]:
        return [r for r in self.runs if r.role == role]

    @property
    def buggy_detected(self) -> bool | None:
        """Every check failed on the buggy variant (None for a user variant)."""
        return None if self.kind == "variant" else all(r.as_expected for r in self._runs("buggy"))

    @property
    def fixed_clean(self) -> bool | None:
        """Every check passed on the fixed variant (None for a user variant)."""
        return None if self.kind == "variant" else all(r.as_expected for r in self._runs("fixed"))

    @property
    def ok(self) -> bool:
        """The entry behaves (or the user's variant is clean)."""
        return all(r.as_expected for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "ok": self.ok,
            "buggy_detected": self.buggy_detected,
            "fixed_clean": self.fixed_clean,
            "seconds": round(self.seconds, 3),
            "checks": [r.to_dict() for r in self.runs],
        }


def run_check(check: Check, variant: Variant, role: Role) -> CheckRun:
    """Run one check, turning an exception into an ``error`` run.

    ``sys.exit()`` in a check or in the variant it runs is that check's error too (whatever
    the status), and so is an exception or ``sys.exit()`` that ends one of its threads, so the
    run goes on and its report is written. Only Ctrl-C ends the run. ``os._exit()`` cannot be
    caught in the process: it ends the run at once (:mod:`harness.regressions.isolated`).
    """
    started = time.perf_counter()
    outcome: CheckOutcome | None = None
    error: str | None = None
    with thread_failures() as failures:
        try:
            outcome = check.run(variant)
        except (Exception, SystemExit) as exc:
            error = describe_error(exc)
    if failures and error is None:
        outcome, error = None, failures[0]
    return CheckRun(check.name, role, outcome, error, time.perf_counter() - started)


def verify(
    targets: Iterable[Regression | tuple[str, Variant]],
    *,
    progress: Callable[[str], None] | None = None,
    starting: Callable[[str, str, Role], None] | None = None,
) -> list[VerifyResult]:
    """Verify entries, and user variants given as ``(label, variant)``; see the module docstring.

    ``starting(id, check, role)`` is called as each check starts (``progress`` gets a sentence).
    """
    from harness.memory.threads import one_torch_thread
    from harness.regressions.checks import generic_checks

    results: list[VerifyResult] = []
    with one_torch_thread():  # small tensors: one thread is faster and steadier when loaded
        for target in targets:
            started = time.perf_counter()
            plan: list[tuple[Check, Variant, Role]]
            if isinstance(target, Regression):
                result = VerifyResult(target.id, "entry")
                roles: list[tuple[Variant, Role]] = [
                    (target.buggy, "buggy"),
                    (target.fixed, "fixed"),
                ]
                plan = [(check, *role) for check in target.checks for role in roles]
            else:
                label, variant = target
                result = VerifyResult(label, "variant")
                plan = [(check, variant, "variant") for check in generic_checks(variant)]
            for check, variant, role in plan:
                if progress is not None:
                    progress(f"{result.id}: {check.name} on {role} ({variant.label})")
                if starting is not None:
                    starting(result.id, check.name, role)
                result.runs.append(run_check(check, variant, role))
            result.seconds = time.perf_counter() - started
            results.append(result)
    return results
