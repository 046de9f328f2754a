"""codec: a summary survives the cache round trip exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.overrides import codec
from harness.overrides.summary import summarize

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize(
    "path",
    sorted((HERE.parent.parent / "harness" / "overrides").glob("*.py")),
    ids=lambda p: p.name,
)
def test_round_trip_is_exact(path: Path) -> None:
    summary = summarize(path.read_bytes())
    assert codec.loads(codec.dumps(summary)) == summary


def test_round_trip_of_a_diagnostic_and_of_calls() -> None:
    source = b"class A:\n    def f(self, a, *, b=1): self.g(1, x=2)\n    async def g(self): super().g()\n"
    summary = summarize(source)
    assert summary.classes[0].calls
    assert codec.loads(codec.dumps(summary)) == summary
    broken = summarize(b"def (")
    assert codec.loads(codec.dumps(broken)) == broken


def test_corrupt_data_raises_a_catchable_error() -> None:
    with pytest.raises((ValueError, EOFError, TypeError)):
        codec.loads(b"\x00garbage")
