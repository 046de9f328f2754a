"""The conditions a call runs under inside its function, as source text: the tests of the blocks
around it (negated for ``else`` and early exits), ``a`` of ``a and f()``, non-empty iterables."""

from __future__ import annotations

import ast
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import TypeVar

from harness.overrides.facts.blocks import inner_blocks

T = TypeVar("T")

_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_LIMIT = 160
"""Longest condition text shown; longer ones are cut with an ellipsis."""


class _Source:
    """A file's text, split into lines once (``ast.get_source_segment`` splits the whole file
    for every node it is asked about)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._lines: list[str] | None = None

    def segment(self, node: ast.AST) -> str:
        """The source of ``node`` (its columns are UTF-8 byte offsets), blanks collapsed, cut
        at ``_LIMIT`` characters; unparsed when its position is not known."""
        first: int | None = getattr(node, "lineno", None)
        last: int | None = getattr(node, "end_lineno", None)
        start: int | None = getattr(node, "col_offset", None)
        end: int | None = getattr(node, "end_col_offset", None)
        if self._lines is None:
            self._lines = self.text.split("\n")
        lines = self._lines
        text = ""
        if first and last and start is not None and end is not None and first <= last <= len(lines):
            if first == last:
                text = lines[first - 1].encode()[start:end].decode(errors="replace")
            else:
                head = lines[first - 1].encode()[start:].decode(errors="replace")
                tail = lines[last - 1].encode()[:end].decode(errors="replace")
                text = "\n".join([head, *lines[first : last - 1], tail])
        text = " ".join((text or ast.unparse(node)).split())
        return text if len(text) <= _LIMIT else text[: _LIMIT - 3] + "..."

    def negated(self, node: ast.expr) -> str:
        """``not <node>``, parenthesised where needed."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return self.segment(node.operand)
        text = self.segment(node)
        loose = isinstance(node, (ast.BoolOp, ast.IfExp, ast.NamedExpr, ast.Lambda))
        return f"not ({text})" if loose else f"not {text}"


def _holds(node: ast.AST, line: int, col: int) -> bool:
    first = getattr(node, "lineno", 0)
    last = getattr(node, "end_lineno", None) or first
    if not first <= line <= last:
        return False
    if line == first and col < getattr(node, "col_offset", 0):
        return False
    end_col = getattr(node, "end_col_offset", None)
    return not (line == last and end_col is not None and col > end_col)


_CATCHES_TYPE_ERROR = frozenset({"TypeError"})
"""A handler naming ``TypeError`` expects it; a catch-all (``except:``, ``except Exception:``)
only reports it (``threading`` runs ``self.run()`` under one), so the crash stands."""


def _caught_names(node: ast.expr | None) -> frozenset[str] | None:
    """The last components of the exception classes ``node`` names (``None``: everything)."""
    if node is None:
        return None
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    return frozenset(
        i.attr if isinstance(i, ast.Attribute) else i.id
        for i in items
        if isinstance(i, ast.Attribute | ast.Name)
    )


def _ends_in_exit(body: Sequence[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], _EXITS)


class Finder:
    """Walks from a function down to the call, collecting the conditions in force."""

    def __init__(self, source: _Source, line: int, col: int, starts: dict[int, list[int]]) -> None:
        self.source = source
        self.starts = starts
        """First lines of the statements of module and class bodies, by ``id`` of the body."""
        self.line = line
        self.col = col
        self.found: list[str] | None = None
        self.handled: list[frozenset[str] | None] = []
        """What the handlers of each ``try`` around the call catch (last components of the
        classes named; ``None`` for a bare ``except:``), innermost last."""
        self.caught: str | None = None
        """Where a ``TypeError`` raised by the call is handled (``except TypeError:`` around
        it, ``with pytest.raises(TypeError):``), described; ``None`` when nowhere."""
        self.origin: dict[str, tuple[ast.expr, bool]] = {}
        """Condition text -> the test and the value it must have."""

    def _held(self, test: ast.expr, value: bool = True) -> str:
        """The text of ``test`` being ``value`` (``not <test>`` for false), noted in :attr:`origin`."""
        text = self.source.segment(test) if value else self.source.negated(test)
        self.origin.setdefault(text, (test, value))
        return text

    def _nonempty(self, iterable: ast.expr) -> str:
        """A loop's condition: its iterable yields something, tested as the truth of the collection
        the items come from (``self.x`` for ``self.x.items()``, ``enumerate(self.x)``, ...)."""
        text = f"{self.source.segment(iterable)} is not empty"
        self.origin.setdefault(text, (_collection(iterable), True))
        return text

    def body(self, stmts: Sequence[ast.stmt], held: list[str], in_function: bool = True) -> bool:
        """Descend into the statement of ``stmts`` holding the call; early exits count only in a
        function body, and other bodies are searched by bisection."""
        held = list(held)
        if not in_function:
            starts = self.starts.get(id(stmts))
            if starts is None:
                starts = self.starts[id(stmts)] = [s.lineno for s in stmts]
            at = bisect_right(starts, self.line) - 1
            for stmt in stmts[max(at - 1, 0) : at + 1]:  # decorators start before `def`
                if _holds(stmt, self.line, self.col):
                    return self.stmt(stmt, held)
            return False
        for stmt in stmts:
            if _holds(stmt, self.line, self.col):
                return self.stmt(stmt, held)
            if isinstance(stmt, ast.If) and stmt.lineno < self.line:
                if _ends_in_exit(stmt.body) and not _ends_in_exit(stmt.orelse):
                    held.append(self._held(stmt.test, False))
                elif _ends_in_exit(stmt.orelse) and not _ends_in_exit(stmt.body):
                    held.append(self._held(stmt.test))
        return False

    def stmt(self, stmt: ast.stmt, held: list[str]) -> bool:
        if isinstance(stmt, (ast.If, ast.While)):
            if _holds(stmt.test, self.line, self.col):
                return self.expr(stmt.test, held)
            taken = self.body(stmt.body, [*held, self._held(stmt.test)])
            return taken or self.body(stmt.orelse, [*held, self._held(stmt.test, False)])
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            if _holds(stmt.iter, self.line, self.col):
                return self.expr(stmt.iter, held)
            taken = self.body(stmt.body, [*held, self._nonempty(stmt.iter)])
            return taken or self.body(stmt.orelse, held)
        if isinstance(stmt, ast.Match):
            subject = self.source.segment(stmt.subject)
            for case in stmt.cases:
                pattern = self.source.segment(case.pattern)
                if self.body(case.body, [*held, f"{subject} matches {pattern}"]):
                    return True
            return self.expr(stmt.subject, held)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return self.body(stmt.body, [])  # what held where it was defined is not a test
        if isinstance(stmt, ast.ClassDef):
            return self.body(stmt.body, [], in_function=False)
        handlers = getattr(stmt, "handlers", ())
        blocks = inner_blocks(stmt)  # the body, else and finally blocks, then the handlers'
        for block in blocks[: len(blocks) - len(handlers)]:
            if self.body(block, held):
                if block is getattr(stmt, "body", None):
                    self.handled.extend(_caught_names(h.type) for h in handlers)
                    if self.caught is None:
                        self.caught = self._catcher(stmt)
                return True
        for handler in handlers:
            caught = "an exception" if handler.type is None else self.source.segment(handler.type)
            if self.body(handler.body, [*held, f"{caught} is raised"]):
                return True
        return self.expr(stmt, held)

    def _catcher(self, stmt: ast.stmt) -> str | None:
        """How ``stmt`` (holding the call in its body) handles a ``TypeError``, if it does."""
        where = f"line {stmt.lineno}"
        for handler in getattr(stmt, "handlers", ()):
            caught = _caught_names(handler.type)
            if handler.type is not None and caught is not None and caught & _CATCHES_TYPE_ERROR:
                return f"except {self.source.segment(handler.type)}: at {where}"
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                expr = item.context_expr
                if not isinstance(expr, ast.Call):
                    continue
                func = expr.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name not in ("raises", "assertRaises", "assertRaisesRegex", "suppress"):
                    continue
                caught = _caught_names(expr.args[0] if expr.args else None)
                if caught is not None and caught & _CATCHES_TYPE_ERROR:
                    return f"with {self.source.segment(expr)}: at {where}"
        return None

    def expr(self, root: ast.AST, held: list[str]) -> bool:
        node: ast.AST = root
        held = list(held)
        while True:
            step: ast.AST | None = None
            if isinstance(node, ast.BoolOp):
                at = next(
                    (i for i, v in enumerate(node.values) if _holds(v, self.line, self.col)), -1
                )
                if at >= 0:
                    and_ = isinstance(node.op, ast.And)
                    held.extend(self._held(b, and_) for b in node.values[:at])
                    step = node.values[at]
            elif isinstance(node, _COMPREHENSIONS):
                step = self._comprehension(node, held)
            elif isinstance(node, ast.IfExp):
                if _holds(node.body, self.line, self.col):
                    held.append(self._held(node.test))
                    step = node.body
                elif _holds(node.orelse, self.line, self.col):
                    held.append(self._held(node.test, False))
                    step = node.orelse
            if step is None:
                inner = (c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))
                step = next((c for c in inner if _holds(c, self.line, self.col)), None)
            if step is None:
                self.found = held
                return True
            node = step

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp, held: list[str]
    ) -> ast.AST | None:
        """The part of a comprehension holding the call, adding to ``held`` what must hold
        for it to run: each earlier ``for``'s iterable yields something, and its ``if``s."""
        for generator in node.generators:
            if _holds(generator.iter, self.line, self.col):
                return generator.iter
            held.append(self._nonempty(generator.iter))
            for test in generator.ifs:
                if _holds(test, self.line, self.col):
                    return test
                held.append(self._held(test))
        return None  # in the element: every condition is in `held`


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SAME_ITEMS = frozenset({"enumerate", "sorted", "reversed", "list", "tuple", "set", "iter"})
_VIEWS = frozenset({"keys", "values", "items"})


def _collection(iterable: ast.expr) -> ast.expr:
    """The collection a loop's items come from, through ``enumerate``/``sorted``/... (one
    argument) and ``.keys()``/``.values()``/``.items()``: empty exactly when it is."""
    while isinstance(iterable, ast.Call) and not iterable.keywords:
        func = iterable.func
        if isinstance(func, ast.Name) and func.id in _SAME_ITEMS and len(iterable.args) == 1:
            iterable = iterable.args[0]
        elif isinstance(func, ast.Attribute) and func.attr in _VIEWS and not iterable.args:
            iterable = func.value
        else:
            break
    return iterable


class Conditions:
    """The conditions of calls in one file (parsed once, on the first question)."""

    def __init__(self, source: str) -> None:
        self.source = _Source(source)
        self._tree: ast.Module | None = None
        self._starts: dict[int, list[int]] = {}
        self._found: dict[tuple[int, int], Finder] = {}

    @property
    def tree(self) -> ast.Module:
        """The parsed file (empty when it does not parse)."""
        if self._tree is None:
            try:
                self._tree = ast.parse(self.source.text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._tree = ast.Module(body=[], type_ignores=[])
        return self._tree

    def finder(self, line: int, col: int) -> Finder:
        """The walk to the call at ``line``/``col`` (1-based column), made once: its conditions,
        the handlers around it (:attr:`Finder.handled`) and where a ``TypeError`` is caught."""
        finder = self._found.get((line, col))
        if finder is None:
            finder = self._found[(line, col)] = Finder(self.source, line, col - 1, self._starts)
            finder.body(self.tree.body, [], in_function=False)
        return finder

    def tests(self, line: int, col: int) -> list[tuple[str, ast.expr | None, bool]]:
        """The conditions of the call at ``line``/``col`` (1-based column), outermost first:
        each its text, the test it comes from (``None`` for a ``match`` case or a handler)
        and the value that test must have."""
        finder = self.finder(line, col)
        out: list[tuple[str, ast.expr | None, bool]] = []
        for text in dict.fromkeys(finder.found or ()):
            test, value = finder.origin.get(text, (None, True))
            if isinstance(test, ast.Constant) and bool(test.value) == value:
                continue  # `while True:` holds always
            out.append((text, test, value))
        return out

    def at(self, line: int, col: int) -> tuple[str, ...]:
        """The conditions' texts (see :meth:`tests`); ``()`` when the call runs
        unconditionally in its function or cannot be found."""
        return tuple(text for text, _, _ in self.tests(line, col))


def necessary(
    test: ast.expr | None, value: bool, leaf: Callable[[ast.expr, bool], list[T]]
) -> list[T]:
    """What ``leaf`` finds must hold for ``test`` to be ``value``, through ``not``, ``and``
    (true: every operand true) and ``or`` (false: every operand false); other tests go to
    ``leaf`` with the value they need."""
    if test is None:
        return []
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return necessary(test.operand, not value, leaf)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) == value:
        return [found for operand in test.values for found in necessary(operand, value, leaf)]
    if isinstance(test, ast.BoolOp):
        return []
    return leaf(test, value)
