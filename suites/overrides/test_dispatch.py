"""dispatch: the per-file facts reachability and decorators are decided from."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterator

from pytest import MonkeyPatch

from harness.overrides.facts import textscan
from harness.overrides.facts.records import (
    ANY_NAME,
    DESCRIPTOR_METHOD,
    DESCRIPTOR_VALUE,
    GUARD_ISINSTANCE,
    GUARD_PARAM,
    DispatchSummary,
    ForeignCall,
)
from harness.overrides.summary import summarize


def facts(source: str) -> DispatchSummary:
    return summarize(textwrap.dedent(source).encode()).dispatch


def test_isinstance_guards_in_branches_and_early_exits() -> None:
    d = facts(
        """
        class A:
            def f(self, x):
                if isinstance(self, (B, C)):
                    return self.g(x)
                return self.g(x, y=1)

            def h(self):
                if not isinstance(self, B):
                    self.g(1)
        """
    )
    by_line = {g.line: g.atoms for g in d.guards}
    (inside,) = by_line[5]
    assert (inside.kind, inside.names, inside.negated) == (GUARD_ISINSTANCE, ("B", "C"), False)
    (after,) = by_line[6]
    assert after.negated  # runs only when the early `return` was not taken
    (negated,) = by_line[10]
    assert (negated.names, negated.negated) == (("B",), True)


def test_a_parameter_test_through_a_local_name() -> None:
    d = facts(
        """
        import inspect

        class M:
            def enable(self):
                old = "value" in inspect.signature(self._set).parameters
                if not old:
                    self._set(enable=True)
                else:
                    self._set(self, value=True)
        """
    )
    atoms = {g.line: g.atoms[0] for g in d.guards}
    assert (atoms[8].kind, atoms[8].names, atoms[8].negated) == (
        GUARD_PARAM,
        ("_set", "value"),
        True,
    )
    assert atoms[10].negated is False


def test_foreign_calls_count_receivers_other_than_self_and_skip_comments() -> None:
    d = facts(
        """
        class S:
            def __init__(self, items):
                self.worker = Worker()
                for item in items:
                    if isinstance(item, Plateau):
                        raise ValueError(item)
                self.items = items
                self.items[0]._first()   # on another object
                self.worker.compute(1)   # typed by its only assignment
                self.compute(2)          # a self call: not foreign
                # self.other._hidden() is in a comment
        """
    )
    assert ForeignCall("_first", None, ("Plateau",)) in d.foreign
    assert ForeignCall("compute", "Worker", ()) in d.foreign
    assert {f.method for f in d.foreign} == {"_first", "compute"}


def test_code_after_a_string_holding_a_hash_is_read_and_comments_are_not() -> None:
    d = facts(
        """
        class P:
            def start(self):
                register("issue #", self._on_issue)  # not: self._in_comment
                register('#', self._on_hash)
                register("a\\" #", self._on_quote) # not: self._after_quote
                label = "it's # " + str(self._on_label)
        """
    )
    (p,) = d.classes
    assert {name for name, _ in p.escapes} == {"_on_issue", "_on_hash", "_on_quote", "_on_label"}


def test_a_line_of_many_strings_holding_a_hash_is_read_once(monkeypatch: MonkeyPatch) -> None:
    # A generated line of thousands of "item #k" strings: reading each `#` from the line's start
    # again took minutes; each line with a quote before its first `#` is tokenised once.
    line = "X = [" + ", ".join(f'"item #{k}"' for k in range(4000)) + "]  # self._c\n"
    reads: list[int] = []
    token = textscan._LINE_TOKEN

    class Counted:
        def finditer(self, text: str, pos: int, endpos: int) -> Iterator[re.Match[str]]:
            reads.append(pos)
            return token.finditer(text, pos, endpos)

    monkeypatch.setattr(textscan, "_LINE_TOKEN", Counted())
    blanked = textscan.blank_comments(line + "y = 'a #'  # z\n")
    assert [row.rstrip() for row in blanked.splitlines()] == [
        line[: line.index("]") + 1],
        "y = 'a #'",
    ]
    assert reads == [0, len(line)]


def test_escapes_and_dynamic_names() -> None:
    d = facts(
        """
        class P:
            def start(self):
                run_later(self._bootstrap)
                getattr(self, "_named")()
                getattr(self, "_visit_" + kind)()

        class Q:
            def call(self, name):
                return getattr(self, name)()

        def dispatch(node):
            return getattr(visitor, f"visit_{node}")(node)
        """
    )
    by_name = {c.qualname: c for c in d.classes}
    assert {("_bootstrap", "start"), ("_named", "start")} <= set(by_name["P"].escapes)
    assert by_name["P"].dynamic == (("_visit_", "start"),)
    assert by_name["Q"].dynamic == ((ANY_NAME, "call"),)
    assert d.prefixes == ("visit_",)


def test_inert_lookups_are_decided_per_receiver() -> None:
    d = facts(
        """
        class R:
            def run(self, kind):
                cls = type(self)
                getattr(self, "_do_" + kind)()
                if getattr(cls, "_has_" + kind, None):
                    return 1
        """
    )
    (r,) = d.classes
    assert r.dynamic == (("_do_", "run"),)  # the `cls` lookup is only tested, never called


def test_descriptors_and_decorator_wrappers() -> None:
    d = facts(
        """
        from functools import update_wrapper, wraps

        class memo:
            def __get__(self, obj, cls):
                return self.fget(obj)

        class hybrid:
            def __get__(self, obj, cls):
                return self.func.__get__(obj, cls)

        def owner(fn):
            def wrap(dialect, conn, table, schema=None, **kw):
                return fn(dialect, conn, table, None, None, schema, **kw)
            return update_wrapper(wrap, fn)

        def traced(fn):
            @wraps(fn)
            def inner(*args, **kwargs):
                return fn(*args, **kwargs)
            return inner

        def tagged(message):
            def go(fn):
                fn.tag = message
                return fn
            return go

        def factory(name):
            def deco(fn):
                def wrap(self, x):
                    return fn(self, x, name)
                return wrap
            return deco
        """
    )
    kinds = {c.qualname: c.descriptor for c in d.classes}
    assert kinds == {"memo": DESCRIPTOR_VALUE, "hybrid": DESCRIPTOR_METHOD}
    wrappers = {w.name: w for w in d.wrappers}
    assert [p.name for p in wrappers["owner"].params] == [
        "dialect",
        "conn",
        "table",
        "schema",
        "kw",
    ]
    assert wrappers["traced"].passthrough
    assert wrappers["factory"].factory and [p.name for p in wrappers["factory"].params] == [
        "self",
        "x",
    ]
    assert "tagged" not in wrappers  # returns the function itself: not a wrapper


def test_long_lines_and_many_matches_stay_linear(
    operations: Callable[[Callable[[], object]], int],
) -> None:
    def source(n: int) -> bytes:
        return ("x = [" + "a.b(" * n + ")" * n + "]  # " + "self.c(" * n + "\n").encode()

    summarize(source(500))  # lazy imports and compiled patterns: the first run's alone
    small = operations(lambda: summarize(source(2_000)))
    large = operations(lambda: summarize(source(4_000)))
    assert large / small < 2.6, f"twice the input took {large / small:.2f}x the operations"
