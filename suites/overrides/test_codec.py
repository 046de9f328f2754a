"""codec: a summary survives the cache round trip exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.overrides import codec
from harness.overrides.facts.callsites import Receiver
from harness.overrides.facts.signature import ParamKind
from harness.overrides.summary import summarize

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize(
    "path",
    sorted((HERE.parent.parent / "harness" / "overrides").rglob("*.py")),
    ids=lambda p: str(p.relative_to(HERE.parent.parent / "harness" / "overrides")),
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


def test_enums_and_frozensets_come_back_as_their_types() -> None:
    source = b"class A:\n    @staticmethod\n    def f(a, *, b=1): A.g(1, x=2)\n    def g(self): self.f(1)\n"
    back = codec.loads(codec.dumps(summarize(source)))
    (cls,) = back.classes
    assert all(type(p.kind) is ParamKind for m in cls.methods for p in m.params)
    assert all(type(m.decorators) is frozenset for m in cls.methods)
    assert cls.calls and all(type(c.receiver) is Receiver for c in cls.calls)


def test_a_deferred_part_of_the_wrong_shape_is_corrupt() -> None:
    import marshal

    (cls,) = codec.loads(codec.dumps(summarize(b"class A:\n    def f(self): self.f()\n"))).classes
    blob = marshal.dumps(tuple(row[:-1] for row in marshal.loads(cls._calls.blob)))  # type: ignore[union-attr]
    with pytest.raises(codec.CorruptSummary):
        codec._calls(blob)


def test_attribute_names_come_back_on_first_use() -> None:
    source = b"class A:\n    def f(self, o):\n        o.size = 1\n        setattr(o, 'shape', 2)\n"
    summary = summarize(source)
    back = codec.loads(codec.dumps(summary))
    assert back.names == summary.names
    assert "size" in back.names.dotted and "shape" in back.names.by_name
    assert all(type(names) is frozenset for names in back.names)


def test_a_corrupt_attribute_names_part_raises_on_first_use() -> None:
    import marshal

    data = list(marshal.loads(codec.dumps(summarize(b"x.y = 1\n"))))
    data[-1] = b"\x00garbage"
    back = codec.loads(marshal.dumps(tuple(data)))  # the rest decodes now
    with pytest.raises(codec.CorruptSummary):
        back.names  # noqa: B018
