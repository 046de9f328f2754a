"""Conditions fixed whenever Python runs the code (``TYPE_CHECKING``,
``torch.jit.is_scripting()``), read through the module's imports."""

from __future__ import annotations

import ast

from harness.overrides.evidence.conditions import necessary
from harness.overrides.facts.signature import dotted_name
from harness.overrides.model.resolve import ClassInfo, ModuleInfo

FIXED: dict[str, tuple[bool, str]] = {
    "typing.TYPE_CHECKING": (False, "it is False whenever Python runs the code"),
    "typing_extensions.TYPE_CHECKING": (False, "it is False whenever Python runs the code"),
    "torch.jit.is_scripting": (
        False,
        "it returns False whenever Python runs the code (True only while TorchScript compiles it)",
    ),
}
"""Fully qualified name -> its value at run time, and why. A name ending in a call is a
function called with no argument."""


def names_needed(test: ast.expr | None, value: bool) -> list[tuple[str, bool]]:
    """``(dotted, wanted)``: for ``test`` to be ``value``, the name (or the argument-less call
    of it) written ``dotted`` must be ``wanted``, through ``not``, ``and`` and ``or``."""
    return necessary(test, value, _leaf)


def _leaf(test: ast.expr, value: bool) -> list[tuple[str, bool]]:
    if isinstance(test, ast.Call) and not test.args and not test.keywords:
        test = test.func
    dotted = dotted_name(test) if isinstance(test, (ast.Name, ast.Attribute)) else None
    return [] if dotted is None else [(dotted, value)]


def qualified(module: ModuleInfo, dotted: str) -> str | None:
    """The fully qualified name ``dotted`` stands for in ``module``, through its absolute
    imports (``jit.is_scripting`` -> ``torch.jit.is_scripting`` after ``import torch.jit as
    jit``); ``None`` when its first name is not imported."""
    head, _, rest = dotted.partition(".")
    imp = module.imports.get(head)
    if imp is None or imp.level:
        return None
    if imp.attr is not None:
        base = f"{imp.module}.{imp.attr}"
    elif imp.name == imp.module.partition(".")[0]:
        base = imp.name  # `import torch.jit` binds `torch`
    else:
        base = imp.module  # `import torch.jit as jit`
    return f"{base}.{rest}" if rest else base


class RunTimeConstants:
    """Decides conditions that need a name fixed at run time (``if TYPE_CHECKING:``)."""

    def false_for(
        self, x: ClassInfo, module: ModuleInfo, line: int, test: ast.expr | None, value: bool
    ) -> str | None:
        """Why ``test`` cannot be ``value`` whenever Python runs the code of ``module``."""
        for dotted, wanted in names_needed(test, value):
            fixed = FIXED.get(qualified(module, dotted) or "")
            if fixed is not None and fixed[0] != wanted:
                return f"{dotted} is fixed: {fixed[1]}"
        return None
