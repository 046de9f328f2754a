"""The deciders, asked in the order of :func:`deciders`: each says why a condition of one kind
cannot hold when a call runs for a class, or ``None`` when it cannot tell (the error stands)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from harness.overrides.evidence.constants import fixed_false
from harness.overrides.evidence.decide import UNSET, Decider, constant_tests
from harness.overrides.evidence.named_classes import Configs, needed
from harness.overrides.evidence.nones import ALWAYS, NEVER, Nones, is_none, not_none
from harness.overrides.evidence.reach import Reach
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project

TreeOf = Callable[[str], ast.Module | None]
"""The parsed file at a path (``None`` when unreadable)."""


class ConditionDecider(Protocol):
    """Decides conditions of one kind for one class at a time."""

    def false_for(
        self, x: ClassInfo, module: ModuleInfo, line: int, test: ast.expr | None, value: bool
    ) -> str | None:
        """Why ``test`` (a condition of a call at ``line`` of ``module``) cannot be ``value``
        when the call runs for an ``x``; ``None`` when this decider cannot tell."""
        ...


class RunTimeConstants:
    """``if TYPE_CHECKING:``, ``if torch.jit.is_scripting():`` (:mod:`.constants`)."""

    def false_for(
        self, x: ClassInfo, module: ModuleInfo, line: int, test: ast.expr | None, value: bool
    ) -> str | None:
        return fixed_false(module, test, value)


@dataclass
class ClassConstants:
    """``if self.NUM_EDGES == 2:`` from the class constant the MRO binds first
    (:meth:`.decide.Decider.constant_for`)."""

    decider: Decider

    def false_for(
        self, x: ClassInfo, module: ModuleInfo, line: int, test: ast.expr | None, value: bool
    ) -> str | None:
        for attr, holds in constant_tests(test, value):
            constant = self.decider.constant_for(x, attr)
            if constant is not None and (constant[0] is UNSET or holds(constant[0]) is False):
                return constant[1]
        return None


@dataclass
class NamedClasses:
    """``if getattr(config, "x", []):`` against the classes an annotation names for
    ``config`` (:meth:`.named_classes.Configs.absent`)."""

    configs: Configs

    def false_for(
        self, x: ClassInfo, module: ModuleInfo, line: int, test: ast.expr | None, value: bool
    ) -> str | None:
        for name, wanted in needed(test, value):
            why = self.configs.absent(x, module, line, name, wanted)
            if why is not None:
                return why
        return None


@dataclass
class NoneLocals:
    """``if ids is None:`` where no ``None`` reaches the local, ``if stream is not None:``
    where only ``None`` does (:mod:`.nones`)."""

    nones: Nones

    def false_for(
        self, x: ClassInfo, module: ModuleInfo, line: int, test: ast.expr | None, value: bool
    ) -> str | None:
        for names, state in ((is_none(test, value), ALWAYS), (not_none(test, value), NEVER)):
            for name in names:
                why = self.nones.decided(x, module, line, name, state)
                if why is not None:
                    return why
        return None


def deciders(
    project: Project, reach: Reach, configs: Configs, tree_of: TreeOf
) -> list[ConditionDecider]:
    """Every decider, in the order they are asked (the cheapest first)."""
    decider = Decider(project, reach, tree_of)
    return [
        RunTimeConstants(),
        ClassConstants(decider),
        NamedClasses(configs),
        NoneLocals(Nones(project, tree_of)),
    ]
