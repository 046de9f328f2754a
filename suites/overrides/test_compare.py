"""compare: parameter alignment and each exemption, one case per line of reasoning.

``codes`` runs the default rules on the alignment, so each case reads as "this drift is
reported as that rule"; the rules' own modules hold the decision.
"""

from __future__ import annotations

import ast

import pytest

from harness.overrides.compare import (
    absorbs_everything,
    align,
    comparable,
    is_catch_all,
    is_dummy,
    is_exempt_method,
    is_operator_dunder,
    kind_breaks_callers,
    moved_parameters,
    narrows,
)
from harness.overrides.facts.signature import ParamKind, Signature, from_function
from harness.overrides.rules import Pair, RuleSet


def sig(source: str) -> Signature:
    """A Signature from ``[@decorator ]def ...`` source (a method of some class)."""
    tree = ast.parse(f"class C:\n    {source.replace(chr(10), chr(10) + '    ')}: pass\n")
    cls = tree.body[0]
    assert isinstance(cls, ast.ClassDef)
    node = cls.body[0]
    assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    return from_function(node, {})


def codes(base: str, override: str) -> list[tuple[str, tuple[str, ...]]]:
    b, o = sig(base), sig(override)
    found = RuleSet().check(Pair(b, o, align(b, o)))
    return [(rule.code, issue.params) for rule, issue in found if rule.code < "HO108"]


@pytest.mark.parametrize(
    ("name", "exempt"),
    [
        ("__init__", True),
        ("__new__", True),
        ("__init_subclass__", True),
        ("__post_init__", True),
        ("__private", True),
        ("_build_decode", False),
        ("__call__", False),
        ("__eq__", False),
        ("build", False),
    ],
)
def test_exempt_methods(name: str, exempt: bool) -> None:
    assert is_exempt_method(name) is exempt


def test_operator_dunders_but_not_call() -> None:
    assert is_operator_dunder("__eq__")
    assert is_operator_dunder("__getitem__")
    assert not is_operator_dunder("__call__")
    assert not is_operator_dunder("_build_decode")
    assert codes("def __eq__(self, other)", "def __eq__(self, rhs)") == []
    assert codes("def __call__(self, x)", "def __call__(self, y)") == [("HO101", ("x", "y"))]


def test_dummy_base_names_may_be_renamed() -> None:
    assert is_dummy("_unused") and is_dummy("_") and not is_dummy("x")
    assert codes("def f(self, _x)", "def f(self, y)") == []


def test_variadics_absorb_everything() -> None:
    assert absorbs_everything(sig("def f(self, *args, **kwargs)"))
    assert not absorbs_everything(sig("def f(self, *args)"))
    assert codes("def f(self, a, b, *, c)", "def f(self, *args, **kwargs)") == []


def test_catch_all_base_declares_nothing_to_drift_from() -> None:
    # vLLM's CustomOp.forward_cuda(self, *args, **kwargs): overrides narrow it by design.
    assert is_catch_all(sig("def forward_cuda(self, *args, **kwargs)"))
    assert not is_catch_all(sig("def forward(self, x, **kwargs)"))
    assert codes("def forward_cuda(self, *args, **kwargs)", "def forward_cuda(self, x)") == []


def test_the_mla_rename() -> None:
    assert codes(
        "def _build_decode(self, block_table_tensor, seq_lens)",
        "def _build_decode(self, block_table, seq_lens)",
    ) == [("HO101", ("block_table_tensor", "block_table"))]


def test_keyword_only_rename_is_a_rename_not_a_generic_difference() -> None:
    assert codes(
        "def build(self, *, common_prefix_len, common_attn_metadata)",
        "def build(self, *, common_prefix_len, attn_metadata)",
    ) == [("HO101", ("common_attn_metadata", "attn_metadata"))]


def test_positional_only_renames_and_swaps_are_legal() -> None:
    assert codes("def f(self, a, b, /)", "def f(self, x, y, /)") == []
    assert codes("def f(self, a, b, /)", "def f(self, b, a, /)") == []


def test_reorder_versus_removal_shift() -> None:
    assert codes("def f(self, q, k, v)", "def f(self, k, q, v)") == [("HO102", ("q", "k"))]
    # Removing the first parameter shifts the rest: that is a removal, not a reorder.
    assert codes("def plan(self, batch, num_tokens)", "def plan(self, num_tokens)") == [
        ("HO103", ("batch",))
    ]
    # Inserting before an existing parameter moves it.
    assert moved_parameters(list(sig("def f(self, a, b)").explicit_params()),
                            list(sig("def f(self, a, x, b)").explicit_params())) == {"b"}  # fmt: skip


def test_added_parameters() -> None:
    assert codes("def f(self, a)", "def f(self, a, b=None)") == []
    assert codes("def f(self, a)", "def f(self, a, b)") == [("HO104", ("b",))]
    assert codes("def f(self, a)", "def f(self, a, *, b)") == [("HO104", ("b",))]
    # A base *args covers extra positional parameters (HO107 reports the narrowing once).
    assert codes("def f(self, a, *args)", "def f(self, a, b)") == [("HO107", ("args",))]


def test_kind_narrowing_and_widening() -> None:
    assert codes("def f(self, a)", "def f(self, *, a)") == [("HO105", ("a",))]
    assert codes("def f(self, a)", "def f(self, a, /)") == [("HO105", ("a",))]
    assert codes("def f(self, *, a)", "def f(self, a)") == []  # widening is legal


def test_removed_default_and_dropped_variadics() -> None:
    assert codes("def f(self, a=1)", "def f(self, a)") == [("HO106", ("a",))]
    assert codes("def f(self, *, a=1)", "def f(self, *, a)") == [("HO106", ("a",))]
    assert codes("def f(self, a, **kw)", "def f(self, a)") == [("HO107", ("kw",))]


def test_removed_parameters() -> None:
    assert codes("def f(self, a, b)", "def f(self, a)") == [("HO103", ("b",))]
    assert codes("def f(self, *, a, b=1)", "def f(self, *, a)") == [("HO103", ("b",))]
    assert codes("def f(self, *, a, b=1)", "def f(self, *, a, **kw)") == []


def test_method_kinds() -> None:
    static = sig("@staticmethod\ndef f(a)")
    instance = sig("def f(self, a)")
    klass = sig("@classmethod\ndef f(cls, a)")
    assert kind_breaks_callers(static, instance)
    assert kind_breaks_callers(klass, instance)
    assert not kind_breaks_callers(instance, klass)  # self.f(a) keeps working
    assert not comparable(static, instance) and align(static, instance) is None
    assert codes("def f(self, a)", "@classmethod\ndef f(cls, a)") == []  # explicit params agree
    assert codes("def f(self, a)", "@classmethod\ndef f(cls, b)") == [("HO101", ("a", "b"))]


def test_narrowing_is_losing_a_way_to_pass() -> None:
    pos, both, kw = (
        ParamKind.POSITIONAL_ONLY,
        ParamKind.POSITIONAL_OR_KEYWORD,
        ParamKind.KEYWORD_ONLY,
    )
    assert narrows(both, kw) and narrows(both, pos) and narrows(pos, kw) and narrows(kw, pos)
    assert not narrows(pos, both) and not narrows(kw, both) and not narrows(both, both)


def test_links_say_where_each_argument_lands() -> None:
    alignment = align(sig("def f(self, a, b, *, c, d=1)"), sig("def f(self, b, x, *, e, d)"))
    assert alignment is not None
    links = {link.base.name: link for link in alignment.links}
    assert links["a"].override is None  # `b` is taken by name, `x` is not in the slot of `a`
    assert links["b"].override is not None and links["b"].override.name == "b"
    assert links["c"].override is not None and links["c"].override.name == "e"  # in order
    assert links["c"].renamed and links["d"].lost_default and not links["d"].renamed
    assert [p.name for p in alignment.unmatched] == ["x"]


def test_one_finding_per_parameter() -> None:
    # A renamed parameter that also loses its default is reported as the rename only.
    assert codes("def f(self, a=1)", "def f(self, b)") == [("HO101", ("a", "b"))]
    # A moved one as the move, a narrowed one as the narrowing.
    assert codes("def f(self, a=1, b=2)", "def f(self, b, a)") == [("HO102", ("a", "b"))]
    assert codes("def f(self, a=1)", "def f(self, *, a)") == [("HO105", ("a",))]


def test_keyword_only_dummy_names_still_count() -> None:
    # A keyword-only parameter can only be passed by keyword, `_x` or not.
    assert codes("def f(self, *, _x)", "def f(self, *, y)") == [("HO101", ("_x", "y"))]


def test_properties_are_not_parameter_compared() -> None:
    assert not comparable(sig("@property\ndef f(self)"), sig("def f(self, x)"))
