"""deciders: one protocol, one explicit list, asked in turn until one decides."""

from __future__ import annotations

import ast
import inspect
from types import SimpleNamespace

from harness.overrides.evidence import constants, decide, named_classes, nones
from harness.overrides.evidence.deciders import ConditionDecider, deciders
from harness.overrides.evidence.proofs import EvidenceIndex
from harness.overrides.model.resolve import Project


def _listed() -> list[ConditionDecider]:
    named = named_classes.NamedClasses(None, lambda path: None)  # type: ignore[arg-type]
    return deciders(None, None, named, lambda path: None)  # type: ignore[arg-type]


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


def test_the_index_asks_one_named_class_reader_for_decisions_and_unstated_keywords() -> None:
    # Two readers would each gather the same hierarchy and store facts.
    index = EvidenceIndex(Project([]))
    assert sum(d is index._named for d in index._deciders) == 1
