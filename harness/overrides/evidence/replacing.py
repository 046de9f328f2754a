"""Decorators that put something else in place of the method (``def inject(func): return
Injector(func)``, ``unittest.mock.patch``): a call the ``def`` rejects proves nothing."""

from __future__ import annotations

import ast
from collections.abc import Callable

from harness.overrides.facts.blocks import always_exits, own_returns
from harness.overrides.facts.signature import dotted_name, first_param
from harness.overrides.model.classdefs import class_defs
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project
from harness.overrides.model.tree import FunctionInfo

Function = ast.FunctionDef | ast.AsyncFunctionDef


def replacement(func: Function) -> str | None:
    """What a one-argument decorator ``func`` returns instead of its argument (the source of
    the first other ``return``, or ``"None"`` when it may fall off its end); ``None`` when
    it always returns the argument itself."""
    param = first_param(func)
    if param is None:
        return None
    if not always_exits(func.body):
        return "None"  # it may fall off its end
    for found in sorted(own_returns(func), key=lambda r: (r.lineno, r.col_offset)):
        value = found.value
        if not (isinstance(value, ast.Name) and value.id == param):
            return "None" if value is None else ast.unparse(value)
    return None


class Replacing:
    """Finds, for a method, a decorator that puts something else in its place."""

    def __init__(self, project: Project, tree_of: Callable[[str], ast.Module | None]) -> None:
        self.project = project
        self.tree_of = tree_of

    def replaced(self, cls: ClassInfo, method: str) -> str | None:
        """Why calls of ``cls.method`` may not reach its ``def``: a decorator replacing it,
        said; ``None`` when none does."""
        defs = class_defs(cls, self.tree_of).get(method, [])
        if not defs:
            return None
        module = cls.module
        for decorator in defs[-1].decorator_list:
            if isinstance(decorator, ast.Call) and self._patches(cls, decorator):
                shown = ast.unparse(decorator.func)
                return (
                    f"{cls.qualname}.{method}() is decorated with @{shown}(...), which passes "
                    "the mock it makes as an extra argument"
                )
            written = dotted_name(decorator)
            if written is None or isinstance(self.project.resolve(module, written), FunctionInfo):
                continue  # a call (a factory's product), or a wrapper read as such
            func = self._function(module, written)
            if func is None:
                continue
            instead = replacement(func)
            if instead is not None:
                return (
                    f"{cls.qualname}.{method}() is decorated with @{written}, which returns "
                    f"{instead} in its place: calls reach that, which the checker does not read"
                )
        return None

    def _function(self, module: ModuleInfo, dotted: str) -> Function | None:
        """The module-level ``def`` of the tree that ``dotted`` names in ``module`` (the last of
        that name: ``@overload`` stubs come before it)."""
        home = self.project.function_home(module, dotted)
        if home is None:
            return None
        tree = self.tree_of(home[0].file.path)
        body = tree.body if tree is not None else []
        defs = [s for s in body if isinstance(s, Function) and s.name == home[1]]
        return defs[-1] if defs else None

    def _patches(self, cls: ClassInfo, decorator: ast.Call) -> bool:
        """Whether ``decorator`` is ``unittest.mock``'s ``patch(target)``,
        ``patch.object(target, name)`` or ``patch.multiple(...)`` making its mocks (no
        ``new`` given): each passes what it makes to the method as an argument."""
        written = dotted_name(decorator.func)
        if written is None:
            return False
        parts = written.split(".")
        if "patch" not in parts:
            return False
        at = parts.index("patch")
        kind = ".".join(parts[at:])
        head = cls.module.imports.get(parts[0])
        source = "" if head is None else ".".join(filter(None, (head.module, head.attr)))
        if not (source.startswith("unittest") or source.partition(".")[0] == "mock"):
            return False
        if kind == "patch.multiple":
            return True
        wanted = {"patch": 1, "patch.object": 2}.get(kind)
        return len(decorator.args) == wanted and "new" not in {k.arg for k in decorator.keywords}
