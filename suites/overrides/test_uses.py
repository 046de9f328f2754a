"""uses: whether a function may call, or change, a value it reads."""

from __future__ import annotations

import ast
import textwrap

from harness.overrides.facts.uses import (
    COLLECTED,
    INERT,
    RETURNED,
    STORED,
    Flow,
    inert,
    inert_lookups,
    parents_of,
)

LOOKUPS = """\
def f(self, names, kind):
    for n in names:
        m = getattr(self, n)
        if not isinstance(m, dict):
            continue
        m.keys()
    a = getattr(self, "visit_" + kind)(1)
    h = getattr(self, kind, None)
    if h is not None:
        h()
    if getattr(self, kind, None) and a:
        pass
    g = getattr(self, kind, None) or self.default
    total = len(getattr(other, kind))
    init = {k: getattr(self, k, None) for k in names}
    pair = (getattr(self, kind), getattr(self, "op_" + kind))
    return getattr(self, kind)
"""


def test_a_lookup_is_inert_only_when_its_value_is_never_called() -> None:
    func = ast.parse(LOOKUPS).body[0]
    assert isinstance(func, ast.FunctionDef)
    # Line 3: a value only tested and read; line 11: a truth test; 15 and 16: container
    # elements. Called (7, 8 via h), passed on through `or` (13) or returned (17): may be
    # called. Line 14 is not on self.
    assert inert_lookups(func, "self") == {
        (3, 12): INERT,
        (11, 7): INERT,
        (15, 15): COLLECTED,
        (16, 12): COLLECTED,
        (16, 33): COLLECTED,
    }


def _uses(source: str, attr: str) -> list[bool]:
    tree = ast.parse(textwrap.dedent(source))
    parents = parents_of(tree)
    return [
        inert(node, parents, changes=True)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == attr
    ]


def test_reads_that_cannot_change_a_value_are_inert_and_the_rest_are_not() -> None:
    quiet = """
        if len(self.h) == 0 or not self.h:
            pass
        for x in self.h:
            print(self.h[0], self.h.get(1), f"{self.h}", self.h.first)
        """
    assert _uses(quiet, "h") == [True] * 7
    loud = """
        self.h.append(1)
        self.h[0] = 2
        other = self.h
        register(self.h)
        y = self.h or []
        """
    assert _uses(loud, "h") == [False] * 5


FLOWS = """\
def f(self, name, flag):
    method = self._defined(name)
    if method is not None:
        return method
    found = getattr(self, name)
    self._forward = found
    pick = self.a if flag else self.b
    run(self.c)
    return pick
"""


def test_where_a_bound_method_goes() -> None:
    func = ast.parse(FLOWS).body[0]
    assert isinstance(func, ast.FunctionDef)
    taken = {
        ast.unparse(node): Flow(func).destinations(node, "self")
        for node in ast.walk(func)
        if isinstance(node, ast.Call | ast.Attribute)
        and ast.unparse(node)
        in ("self._defined(name)", "getattr(self, name)", "self.a", "self.b", "self.c")
    }
    assert taken == {
        "self._defined(name)": frozenset({RETURNED}),  # through `method`, tested, then returned
        "getattr(self, name)": frozenset({STORED + "_forward"}),
        "self.a": frozenset({RETURNED}),
        "self.b": frozenset({RETURNED}),
        "self.c": None,  # passed to another function: may be called there
    }
