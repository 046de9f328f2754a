"""A user's spec verified in a child: the results read back are the ones the child had."""

from __future__ import annotations

from harness.regressions import Check
from harness.regressions.isolated import from_dict
from harness.regressions.verify import verify

from .variants import entry, raises


def test_results_survive_the_trip_from_the_child() -> None:
    (result,) = verify([entry("mixed", Check("boom", "cannot run", raises))])
    back = from_dict(result.to_dict())
    assert back.to_dict() == result.to_dict()
    assert [r.verdict for r in back.runs] == ["error", "error"] and not back.ok
