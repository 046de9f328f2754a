"""callsites: which calls are recorded, with which receiver and argument shape."""

from __future__ import annotations

import ast

from harness.overrides.facts.callsites import CallSite, FileHits, Receiver, collect


def calls(source: str, *, self_name: str | None = "self") -> list[CallSite]:
    tree = ast.parse(source)
    func = tree.body[-1]
    assert isinstance(func, ast.FunctionDef)
    return collect(func, FileHits(source), caller=func.name, self_name=self_name)


def shapes(
    source: str, **kw: str | None
) -> list[tuple[Receiver, str | None, str, int, tuple[str, ...]]]:
    return [
        (c.receiver, c.receiver_class, c.method, c.n_positional, c.keywords)
        for c in calls(source, **kw)
    ]


def test_self_call_with_keywords_over_several_lines() -> None:
    source = (
        "def build(self, x):\n"
        "    decode_metadata = self._build_decode(\n"
        "        block_table_tensor=x,\n"
        "        seq_lens=x)\n"
    )
    (site,) = calls(source)
    assert site.receiver is Receiver.SELF and site.method == "_build_decode"
    assert site.keywords == ("block_table_tensor", "seq_lens") and site.n_positional == 0
    assert site.line == 2 and site.caller == "build"
    assert site.text == "decode_metadata = self._build_decode("


def test_super_and_unpacking() -> None:
    source = "def f(self, *a, **k):\n    super().f(1, *a, key=2, **k)\n    super(B, self).g()\n"
    (first, second) = calls(source)
    assert (first.receiver, first.n_positional, first.star, first.starstar) == (
        Receiver.SUPER,
        1,
        True,
        True,
    )
    assert (second.receiver, second.receiver_class, second.method) == (Receiver.SUPER, "B", "g")


def test_constructed_receivers() -> None:
    source = "def f():\n    Builder(1).build(a=1)\n    b = Builder()\n    b.build(x=2)\n"
    assert shapes(source, self_name=None) == [
        (Receiver.CONSTRUCTED, "Builder", "build", 0, ("a",)),
        (Receiver.CONSTRUCTED, "Builder", "build", 0, ("x",)),
    ]


def test_rebound_local_is_not_trusted() -> None:
    source = (
        "def f(flag):\n    b = Builder()\n    if flag:\n        b = Other()\n    b.build(x=2)\n"
    )
    assert calls(source, self_name=None) == []
    source = "def f():\n    b = Builder()\n    for b in []:\n        pass\n    b.build(x=2)\n"
    assert calls(source, self_name=None) == []


def test_a_local_bound_to_more_than_one_constructor_call_is_not_trusted() -> None:
    # As astropy's `m = Gaussian2D(...) & Shift(1) & Shift(2)`: `&` builds another model.
    for value in ("Gaussian2D(1) & Shift(1)", "Builder(1).configure()", "Builder() or None"):
        source = f"def f():\n    m = {value}\n    m.evaluate(1, 2, 3)\n"
        assert [c for c in calls(source, self_name=None) if c.method == "evaluate"] == [], value


def test_annotated_parameter_receiver() -> None:
    source = "def run(builder: Optional[MLACommonMetadataBuilder]):\n    builder.build(common_prefix_len=0)\n"
    assert shapes(source, self_name=None) == [
        (Receiver.ANNOTATED, "MLACommonMetadataBuilder", "build", 0, ("common_prefix_len",))
    ]


def test_third_party_annotations_are_ignored() -> None:
    source = "def f(self, x: torch.Tensor):\n    x.view(1)\n"
    assert calls(source) == []


def test_nested_class_has_its_own_self() -> None:
    source = (
        "def f(self):\n"
        "    class Inner:\n"
        "        def g(self):\n"
        "            self.h(1)\n"
        "    return [self.h(2) for _ in range(1)]\n"
    )
    assert [c.line for c in calls(source)] == [5]


def test_calls_inside_strings_are_not_calls() -> None:
    source = 'def f(self):\n    text = "self.g(1)"\n    return text\n'
    assert calls(source) == []


def test_inner_functions_with_their_own_self_are_not_self_calls() -> None:
    source = (
        "def f(self):\n"
        "    def helper(self):\n"
        "        return self.g(1)\n"
        "    cb = lambda self: self.g(2)\n"
        "    return self.g(3), helper, cb\n"
    )
    assert [c.line for c in calls(source)] == [5]
