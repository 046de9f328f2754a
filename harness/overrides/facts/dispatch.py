"""Per-file facts that decide whether a call can run for a given subclass, and what a decorated
``def`` really binds, gathered by :func:`extract` with the summary: guards (:mod:`.guards`), foreign
calls, escapes and dynamic dispatch (:mod:`.textscan`), descriptors, decorators and wrappers
(:mod:`.wrappers`), as the records of :mod:`.records`.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Protocol

from harness.overrides.facts.blocks import class_functions
from harness.overrides.facts.callsites import CallSite, FileHits
from harness.overrides.facts.guards import call_guards
from harness.overrides.facts.records import DESCRIPTOR_NONE, ClassFacts, DispatchSummary, Guard
from harness.overrides.facts.signature import MethodKind, Signature, first_param
from harness.overrides.facts.textscan import (
    blank_comments,
    foreign_calls,
    global_prefixes,
    text_facts,
)
from harness.overrides.facts.wrappers import descriptor_kind, unknown_decorators, wrapper_of


class ClassStatement(Protocol):
    """What the dispatch facts read of a class's summary (:class:`.summary.ClassSummary`)."""

    @property
    def qualname(self) -> str: ...

    @property
    def methods(self) -> Sequence[Signature]: ...

    @property
    def calls(self) -> Sequence[CallSite]: ...


EMPTY = DispatchSummary((), (), (), (), ())
_GUARD_WORDS = ("isinstance(", "signature(", "type(", "__class__.")


def extract(
    tree: ast.Module,
    classes: Sequence[tuple[ast.ClassDef, ClassStatement]],
    aliases: dict[str, str],
    hits: FileHits,
) -> DispatchSummary:
    """The dispatch facts of one parsed file, given its class statements and summaries."""
    text = hits.text
    code = blank_comments(text)
    nodes = [node for node, _ in classes]
    bodies = [hits.between(code, node.lineno, node.end_lineno or node.lineno) for node in nodes]
    per_class = [text_facts(code, hits, n, b) for n, b in zip(nodes, bodies, strict=True)]
    foreign = foreign_calls(code, hits, tree, nodes, bodies, [typed for typed, _, _ in per_class])

    # Guards of recorded self calls, decorators the checker does not know, descriptors.
    guards: list[Guard] = []
    facts: list[ClassFacts] = []
    for (node, summary), (typed, escapes, dynamic) in zip(classes, per_class, strict=True):
        effective = {(m.line, m.name): m for m in summary.methods}
        class_text = hits.between(text, node.lineno, node.end_lineno or node.lineno)
        has_guards = any(w in class_text for w in _GUARD_WORDS)
        decorated: list[tuple[int, tuple[str, ...]]] = []
        for stmt in class_functions(node):
            sig = effective.get((stmt.lineno, stmt.name))
            if sig is None:
                continue
            unknown = unknown_decorators(stmt, aliases) if stmt.decorator_list else ()
            if unknown:
                decorated.append((stmt.lineno, unknown))
            if not has_guards or sig.kind is MethodKind.STATIC:
                continue
            self_name = first_param(stmt)
            f_last = stmt.end_lineno or stmt.lineno
            calls = [
                (c.line, c.col)
                for c in summary.calls
                if c.caller == stmt.name and stmt.lineno <= c.line <= f_last
            ]
            if self_name is None or not calls:
                continue
            f_text = hits.between(text, stmt.lineno, f_last)
            if (
                f"isinstance({self_name}" in f_text
                or "signature(" in f_text
                or f"type({self_name})." in f_text
                or f"{self_name}.__class__." in f_text
            ):
                guards.extend(call_guards(stmt, self_name, calls))
        fact = ClassFacts(
            qualname=summary.qualname,
            escapes=tuple(sorted(escapes)),
            dynamic=tuple(dict.fromkeys(dynamic)),
            attr_types=tuple(sorted(typed.items())),
            descriptor=descriptor_kind(node) if "__get__" in class_text else DESCRIPTOR_NONE,
            decorators=tuple(decorated),
        )
        if any(fact[1:]):  # a class with a fact beside its name
            facts.append(fact)
    wrappers = (
        wrapper_of(stmt)
        for stmt in tree.body
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
    )
    return DispatchSummary(
        classes=tuple(facts),
        wrappers=tuple(w for w in wrappers if w is not None),
        foreign=tuple(
            sorted(foreign, key=lambda f: (f.method, f.receiver_class or "", f.rejected))
        ),
        guards=tuple(guards),
        prefixes=tuple(sorted(set(global_prefixes(code)))),
    )
