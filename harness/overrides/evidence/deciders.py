"""The deciders, asked in the order of :func:`deciders`: each says why a condition of one kind
cannot hold when a call runs for a class, or ``None`` when it cannot tell (the error stands)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Protocol

from harness.overrides.evidence.constants import RunTimeConstants
from harness.overrides.evidence.decide import ClassConstants
from harness.overrides.evidence.named_classes import NamedClasses
from harness.overrides.evidence.nones import NoneLocals
from harness.overrides.evidence.reach import Reach
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project


class ConditionDecider(Protocol):
    """Decides conditions of one kind for one class at a time."""

    def false_for(
        self, x: ClassInfo, module: ModuleInfo, line: int, test: ast.expr | None, value: bool
    ) -> str | None:
        """Why ``test`` (a condition of a call at ``line`` of ``module``) cannot be ``value``
        when the call runs for an ``x``; ``None`` when this decider cannot tell."""
        ...


def deciders(
    project: Project,
    reach: Reach,
    named: NamedClasses,
    tree_of: Callable[[str], ast.Module | None],
) -> list[ConditionDecider]:
    """Every decider, in the order they are asked (the cheapest first); ``named`` is shared with
    the caller, which asks it about keywords callers leave unstated (one cache for both)."""
    return [
        RunTimeConstants(),
        ClassConstants(project, reach, tree_of),
        named,
        NoneLocals(project, tree_of),
    ]
