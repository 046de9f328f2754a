"""Where a bound method goes once a method takes it, as far as the code shows
(:class:`harness.overrides.facts.uses.Flow`): returned, to the callers' use of the result; stored in
``self.<attr>``, to the ``self.<attr>(...)`` calls; any other use counts as a call there."""

from __future__ import annotations

import ast
from collections.abc import Callable

from harness.overrides.evidence.attributes import modules_naming, named_on_other_objects
from harness.overrides.evidence.named_classes import Function
from harness.overrides.evidence.reach import NO, OWN, UNTYPED, YES, Reach
from harness.overrides.facts.callsites import CallSite, Receiver
from harness.overrides.facts.signature import first_param
from harness.overrides.facts.uses import RETURNED, STORED, Flow
from harness.overrides.model.classdefs import class_defs
from harness.overrides.model.resolve import ClassInfo

_MAX_TRAIL = 8
"""Returns and stores followed from one place a bound method is taken, at most."""


class Bound:
    """Follows bound methods for one :class:`.reach.Reach`, remembering each answer: after
    ``self._fwd = self.pick()`` (``return self.fast``), ``fast`` runs only where ``self._fwd()``
    does."""

    def __init__(self, reach: Reach, tree_of: Callable[[str], ast.Module | None]) -> None:
        self.reach = reach
        self.tree_of = tree_of
        self._elsewhere: dict[str, bool] = {}
        self._taken_memo: dict[tuple[int, int, str, str, bool], int] = {}
        self._ends: dict[tuple[int, str], int] = {}
        self._methods: dict[int, dict[str, list[Function]]] = {}
        self._flows: dict[int, Flow] = {}

    def taken(
        self,
        x: ClassInfo,
        cls: ClassInfo,
        where: str,
        method: str,
        lookup: bool,
        trail: frozenset[str],
    ) -> int:
        """The level at which the bound method ``cls.where`` takes may be called for an ``x``;
        :data:`YES` when ``where`` itself may call it, or the trail (already on the way) is long."""
        if len(trail) > _MAX_TRAIL:
            return YES
        key = (id(x), id(cls), where, method, lookup)
        if key in self._taken_memo:
            return self._taken_memo[key]
        level = NO
        found = self._method(cls, where)
        if found is None:
            level = YES
        else:
            _, me, flow = found  # no node found: the text matched inside a string, NO
            for node in flow.taken(me, method, lookup):
                ends = flow.destinations(node, me)
                level = (
                    YES if ends is None else max(level, self._reached(x, ends, cls, where, trail))
                )
                if level == YES:
                    break
        self._taken_memo[key] = level
        return level

    def _reached(
        self, x: ClassInfo, found: frozenset[str], cls: ClassInfo, where: str, trail: frozenset[str]
    ) -> int:
        level = NO
        for destination in found:
            key = f"{id(cls)}.{where}" if destination == RETURNED else destination
            if key in trail:
                continue  # already on the way: its other ends are counted there
            memo = (id(x), key)
            if memo not in self._ends:
                if destination == RETURNED:
                    known = self._result_called(x, where, trail | {key})
                else:
                    known = self._attribute_called(x, destination[len(STORED) :], trail | {key})
                self._ends[memo] = known
            level = max(level, self._ends[memo])
        return level

    def _result_called(self, x: ClassInfo, method: str, trail: frozenset[str]) -> int:
        """The level at which the result of a method ``method`` may be called for an ``x``."""
        level = UNTYPED if self.reach.foreign.get(method) else NO
        for call, site, module in self.reach.calls(method):
            if call.receiver not in OWN or site is None:
                named = call.receiver_class
                target = self.reach.project.resolve_class(module, named) if named else None
                level = max(level, YES if target is x else UNTYPED)
                continue
            if not self.reach.project.in_mro(site, x) or not call.caller:
                continue
            runs = self.reach.call_runs(x, call, site, module)
            if runs == NO:
                continue
            found = self._call_destinations(site, call)
            if found is not None:
                runs = min(runs, self._reached(x, found, site, call.caller, trail))
            level = max(level, runs)
            if level == YES:
                break
        return level

    def _attribute_called(self, x: ClassInfo, attr: str, trail: frozenset[str]) -> int:
        """The level at which ``self.<attr>``, holding a bound method, may be called for an
        ``x``: its ``self.<attr>(...)`` calls, the places it is taken on (``self.<attr>``
        uncalled), and any ``.<attr>`` on another object (:data:`UNTYPED`)."""
        level = UNTYPED if self._named_elsewhere(attr) else NO
        in_mro = self.reach.project.in_mro
        for call, site, module in self.reach.own_calls(x, attr, (Receiver.SELF, Receiver.CLS)):
            level = max(level, self.reach.call_runs(x, call, site, module))
        if level != YES:
            places = [(c, w, False) for c, w in self.reach.escaping.get(attr, ()) if in_mro(c, x)]
            level = max(level, self.reach.best(x, attr, places, trail) or NO)
        return level

    def _call_destinations(self, site: ClassInfo, call: CallSite) -> frozenset[str] | None:
        """Where the value of ``call`` goes in its method (``None``: anywhere)."""
        found = self._method(site, call.caller)
        if found is None:
            return None
        func, me, flow = found
        for node in ast.walk(func):
            if (
                isinstance(node, ast.Call)
                and node.lineno == call.line
                and node.col_offset + 1 == call.col
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == call.method
            ):
                return flow.destinations(node, me)
        return None

    def _method(self, cls: ClassInfo, name: str) -> tuple[Function, str, Flow] | None:
        """The last ``def name`` of ``cls``'s body (the class statement found once), the name
        of its receiver and its flow; ``None`` when there is none or it takes no receiver."""
        if id(cls) not in self._methods:
            self._methods[id(cls)] = class_defs(cls, self.tree_of)
        defs = self._methods[id(cls)].get(name)
        me = first_param(defs[-1]) if defs else None
        if not defs or me is None:
            return None
        func = defs[-1]
        flow = self._flows.get(id(func))
        if flow is None or flow.func is not func:
            flow = self._flows[id(func)] = Flow(func)
        return func, me, flow

    def _named_elsewhere(self, attr: str) -> bool:
        """Whether a file of the project writes ``.<attr>`` on an object other than
        ``self``/``cls`` (the stored method may be read and called there)."""
        if attr not in self._elsewhere:
            project = self.reach.project
            self._elsewhere[attr] = any(
                (text := project.text(module.file.path)) is not None
                and named_on_other_objects(text, attr)
                for module in modules_naming(project, attr)
            )
        return self._elsewhere[attr]
