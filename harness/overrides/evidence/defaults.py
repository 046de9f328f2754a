"""Parameters the call entering a method leaves at their default ``None``: ``def __init__(self,
m=None): if m is not None: self.update(m)`` never calls ``update`` through ``super().__init__()``."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from harness.overrides.evidence.nones import not_none
from harness.overrides.facts.callsites import CallSite

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _defaults(func: Function) -> dict[str, ast.expr]:
    """Each parameter with a default, and that default."""
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    with_default = positional[len(positional) - len(args.defaults) :]
    out = {a.arg: d for a, d in zip(with_default, args.defaults, strict=True)}
    kwonly = zip(args.kwonlyargs, args.kw_defaults, strict=True)
    out.update((a.arg, d) for a, d in kwonly if d is not None)
    return out


def left_at_none(
    func: Function,
    bound_self: bool,
    tests: Sequence[tuple[str, ast.expr | None, bool]],
    entry: CallSite,
) -> tuple[str, str] | None:
    """``(condition text, parameter)`` of the first of ``tests`` (a call's conditions in
    ``func``) that needs a parameter not ``None`` which ``entry`` leaves at its default
    ``None``; ``bound_self``: ``func``'s first parameter is the receiver, not passed."""
    if entry.star or entry.starstar:
        return None
    positional = [a.arg for a in (*func.args.posonlyargs, *func.args.args)][bound_self:]
    defaults = _defaults(func)
    for text, test, value in tests:
        for name in not_none(test, value):
            default = defaults.get(name)
            if not (isinstance(default, ast.Constant) and default.value is None):
                continue
            at = positional.index(name) if name in positional else None
            passed = name in entry.keywords or (at is not None and at < entry.n_positional)
            if not passed and not any(  # nor does the method bind the name again
                isinstance(node, ast.Name)
                and node.id == name
                and not isinstance(node.ctx, ast.Load)
                for node in ast.walk(func)
            ):
                return text, name
    return None
