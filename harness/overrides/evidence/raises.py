"""Calls that never run for a class because ``self.m(...)`` runs before them on every path and
the class's ``m`` always raises (a top-level ``raise`` before any ``return`` or ``yield``)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from harness.overrides.evidence.named_classes import descend, method_at, self_call
from harness.overrides.facts.blocks import SCOPES, holds
from harness.overrides.facts.signature import dotted_name, first_param
from harness.overrides.model.classdefs import read_def
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project

_LEAVES = (ast.Return, ast.Yield, ast.YieldFrom)
_DEPTH = 4
"""How many always-raising calls deep a method is followed."""
_MANAGERS = frozenset({"contextmanager", "asynccontextmanager"})


def _before(body: list[ast.stmt], line: int) -> Iterator[ast.stmt | ast.expr]:
    """What runs before ``line`` on every path through ``body``: the earlier statements of
    each block on the way to it, and the context expressions of the ``with`` statements
    holding it; nothing past a nested ``def`` or ``class``."""
    for earlier, holder, _ in descend(body, line):
        yield from earlier
        if isinstance(holder, (ast.With, ast.AsyncWith)) and holder.body[0].lineno <= line:
            yield from (item.context_expr for item in holder.items)
        if isinstance(holder, SCOPES):
            return


class Raisers:
    """Decides, for a class, which calls come after a ``self`` method that always raises."""

    def __init__(self, project: Project, tree_of: Callable[[str], ast.Module | None]) -> None:
        self.project = project
        self.tree_of = tree_of
        self._memo: dict[tuple[int, str, bool, int], tuple[str, str] | None] = {}

    def before(self, x: ClassInfo, module: ModuleInfo, line: int) -> str | None:
        """Why the call at ``line`` of ``module`` never runs for an ``x``: what raises before
        it, said; ``None`` when the code does not show it."""
        found = method_at(self.tree_of(module.file.path), line)
        if found is None:
            return None  # not directly in a method
        func, me = found
        for earlier in _before(func.body, line):
            method = self_call(earlier, me)
            entered = isinstance(earlier, ast.expr)
            raised = None if method is None else self.raised(x, method, entered)
            if raised is not None:
                where = f"{module.file.display}:{earlier.lineno}"
                shown = f"with self.{method}(...)" if entered else f"self.{method}(...)"
                return f"{shown} (at {where}) comes before it, and {raised[1]}"
        return None

    def raised(
        self, x: ClassInfo, method: str, entered: bool = False, depth: int = 0
    ) -> tuple[str, str] | None:
        """The last name of the exception class ``x``'s ``method`` always raises when called
        (``entered``: or, for a ``@contextmanager`` generator, when entered; ``""`` when not
        written as a name), and how, said; ``None`` when it may not raise."""
        key = (id(x), method, entered, depth)  # the depth too: what is found depends on it
        if key not in self._memo:
            self._memo[key] = self._raises(x, method, entered, depth)
        return self._memo[key]

    def _raises(
        self, x: ClassInfo, method: str, entered: bool, depth: int
    ) -> tuple[str, str] | None:
        if depth > _DEPTH:
            return None
        found = read_def(self.project, x, method, self.tree_of)
        if found is None:
            return None
        definer, func = found
        decorators = {(dotted_name(d) or "?").rpartition(".")[2] for d in func.decorator_list}
        manager = entered and bool(decorators) and decorators <= _MANAGERS
        if not manager and (
            not decorators <= {"abstractmethod"}
            or isinstance(func, ast.AsyncFunctionDef)
            or holds(func, (ast.Yield, ast.YieldFrom))
        ):
            return None  # a coroutine or generator function runs nothing when called
        me = first_param(func)
        if me is None:
            return None
        name = f"{definer.qualname}.{method}()"
        where = definer.module.file.display
        for stmt in func.body:
            if isinstance(stmt, ast.Raise):
                raised = None
                if stmt.exc is not None:
                    target = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
                    raised = dotted_name(target)
                when = "before its first yield" if manager else "whenever it is called"
                said = f"{name} raises {raised or 'an exception'} {when} ({where}:{stmt.lineno})"
                return (raised or "").rpartition(".")[2], said
            called = self_call(stmt, me)
            if called is not None:
                inner = self.raised(x, called, False, depth + 1)
                if inner is not None:
                    return inner[0], f"{name} calls self.{called}(...) first, and {inner[1]}"
            if holds(stmt, _LEAVES):
                return None
        return None
