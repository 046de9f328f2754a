"""Verification of a user's ``--regression MODULE:ATTR`` in a child process of its own.

``harness regressions verify`` runs each user spec through :func:`harness.child.run_in_child`
(about 3 s more per spec: one interpreter start and its imports). The child resolves the spec
and verifies it, marking each check as it starts; a child that ends without its results (an
``os._exit()``, a crash in native code) becomes an ``error`` run of the check that was running,
with how the child ended and its last lines. A usage error in the child (no such attribute, an
import that fails) is raised here as the same one line.
"""

from __future__ import annotations

from typing import Any, cast

from harness.child import mark
from harness.errors import ChildError, with_last_lines
from harness.regressions.entry import CheckOutcome
from harness.regressions.verify import CheckRun, Role, VerifyResult


def verify_in_child(spec: str) -> VerifyResult:
    """Verify ``spec`` (user code) in a child process; see the module docstring."""
    from harness.child import run_in_child

    try:
        (data,) = run_in_child("harness.regressions.isolated:verify_here", spec)
    except ChildError as exc:
        return _died(spec, exc)
    return from_dict(cast("dict[str, Any]", data))


def verify_here(spec: str) -> list[dict[str, Any]]:
    """The child's side: resolve ``spec`` and verify it, marking each check as it starts."""
    from harness.regressions.entry import Variant
    from harness.regressions.resolve import resolve_target
    from harness.regressions.verify import verify

    resolved = resolve_target(spec)
    target = (spec, resolved) if isinstance(resolved, Variant) else resolved
    return [r.to_dict() for r in verify([target], starting=_mark)]


def _mark(label: str, check: str, role: Role) -> None:
    mark(f"{label}\t{check}\t{role}")


def _died(spec: str, exc: ChildError) -> VerifyResult:
    parts = [] if exc.step is None else exc.step.split("\t")
    if len(parts) == 3:  # a check's mark: id, check, role
        label, check, role = parts
    else:  # before any check (the import of the user's module, say)
        label, role = spec, "variant"
        check = "(before any check)" if exc.step is None else f"({exc.step})"
    error = with_last_lines(
        f"{exc.how}, while this check ran; the checks after it did not run", exc.last_lines
    )
    result = VerifyResult(label, "variant" if role == "variant" else "entry")
    result.runs.append(CheckRun(check, cast("Role", role), None, error, 0.0))
    return result


def from_dict(data: dict[str, Any]) -> VerifyResult:
    """A :class:`VerifyResult` from its :meth:`~VerifyResult.to_dict` form."""
    result = VerifyResult(str(data["id"]), data["kind"], seconds=float(data["seconds"]))
    for run in cast("list[dict[str, Any]]", data["checks"]):
        detail = str(run["detail"])
        outcome = (
            None if run["verdict"] == "error" else CheckOutcome(run["verdict"] == "FAIL", detail)
        )
        error = detail if outcome is None else None
        result.runs.append(
            CheckRun(str(run["check"]), run["variant"], outcome, error, float(run["seconds"]))
        )
    return result
