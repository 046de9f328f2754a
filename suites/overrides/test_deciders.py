"""deciders: one protocol, one explicit list, asked in turn until one decides."""

from __future__ import annotations

import ast
import inspect
from types import SimpleNamespace

from harness.overrides.evidence import constants, decide, named_classes, nones
from harness.overrides.evidence.deciders import ConditionDecider, deciders


def _listed() -> list[ConditionDecider]:
    return deciders(None, None, lambda path: None)  # type: ignore[arg-type]


def test_every_decider_class_is_in_the_list_once() -> None:
    defined = {
        name
        for module in (constants, decide, named_classes, nones)
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and value.__module__ == module.__name__
        and hasattr(value, "false_for")
        and value is not ConditionDecider
    }
    listed = [type(d).__name__ for d in _listed()]
    assert sorted(listed) == sorted(defined) and len(listed) == len(set(listed))
    assert listed[0] == "RunTimeConstants"  # no project lookup: asked first


def test_a_decider_that_cannot_tell_says_none() -> None:
    (fixed, *_) = _listed()
    test = ast.parse("self.ready", mode="eval").body
    no_imports = SimpleNamespace(imports={})
    assert fixed.false_for(None, no_imports, 1, test, True) is None  # type: ignore[arg-type]
