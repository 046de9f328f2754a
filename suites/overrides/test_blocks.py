"""facts.blocks: the statement lists a compound statement holds."""

from __future__ import annotations

import ast

from harness.overrides.facts.blocks import blocks, own_returns, scope_blocks


def _first(source: str) -> ast.stmt:
    return ast.parse(source).body[0]


def test_scope_blocks_add_an_if_s_branches_to_blocks() -> None:
    branch = _first("if a:\n    x = 1\nelse:\n    y = 2\n")
    assert blocks(branch) == []
    assert [[ast.unparse(s) for s in b] for b in scope_blocks(branch)] == [["x = 1"], ["y = 2"]]


def test_scope_blocks_are_blocks_for_every_other_statement() -> None:
    for source in (
        "for i in x:\n    a = 1\nelse:\n    b = 2\n",
        "with f() as g:\n    c = 3\n",
        "try:\n    d = 4\nexcept E:\n    e = 5\nelse:\n    f = 6\nfinally:\n    g = 7\n",
        "match x:\n    case 1:\n        h = 8\n",
        "i = 9\n",
    ):
        stmt = _first(source)
        assert scope_blocks(stmt) == blocks(stmt)
    assert len(blocks(_first("try:\n    d = 4\nexcept E:\n    e = 5\nfinally:\n    g = 7\n"))) == 4


def test_own_returns_are_those_of_the_function_s_own_scope() -> None:
    source = """\
def f(x):
    def inner():
        return 1
    class C:
        def m(self):
            return 2
    g = lambda: 3
    try:
        return 4
    except E:
        match x:
            case 5:
                return 5
    if x:
        return 6
"""
    func = _first(source)
    assert isinstance(func, ast.FunctionDef)
    assert sorted(ast.unparse(r) for r in own_returns(func)) == ["return 4", "return 5", "return 6"]
