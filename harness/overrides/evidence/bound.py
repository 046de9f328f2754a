"""Where a bound method goes once a method takes it: followed for reachability.

``self._fwd = self.dispatch()``, with ``dispatch`` returning ``self.forward_cpu``, calls
``forward_cpu`` only where ``self._fwd(...)`` runs. :meth:`Bound.taken` follows the value as far as
the code shows (:class:`harness.overrides.facts.uses.Flow`): returned, to the callers' use of the
result; stored in ``self.<attr>``, to the ``self.<attr>(...)`` calls. Any other use counts as a call
there.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.overrides.evidence.attributes import modules_naming, named_on_other_objects
from harness.overrides.evidence.reach import NO, UNTYPED, YES
from harness.overrides.facts.callsites import CallSite, Receiver
from harness.overrides.facts.uses import RETURNED, STORED, Flow
from harness.overrides.model.classdefs import class_defs
from harness.overrides.model.resolve import ClassInfo

if TYPE_CHECKING:
    from harness.overrides.evidence.reach import Reach

Function = ast.FunctionDef | ast.AsyncFunctionDef
_MAX_TRAIL = 8
"""Returns and stores followed from one place a bound method is taken, at most."""


class Bound:
    """Follows bound methods for one :class:`harness.overrides.evidence.reach.Reach`, remembering each
    answer."""

    def __init__(self, reach: Reach, tree_of: Callable[[str], ast.Module | None] | None) -> None:
        self.reach = reach
        self.tree_of = tree_of
        """The parsed file at a path (``None``: nothing is followed)."""
        self._elsewhere: dict[str, bool] = {}
        self._taken_memo: dict[tuple[int, int, str, str, bool], int] = {}
        self._ends: dict[tuple[int, str], int] = {}
        self._methods: dict[int, dict[str, list[Function]]] = {}
        self._flows: dict[int, Flow] = {}

    def release(self) -> None:
        """Drop what was gathered and the references to the reach and the trees."""
        self.tree_of = None
        for table in (self._elsewhere, self._taken_memo, self._ends, self._methods, self._flows):
            table.clear()

    def taken(
        self,
        x: ClassInfo,
        cls: ClassInfo,
        where: str,
        method: str,
        lookup: bool,
        trail: frozenset[str],
    ) -> int:
        """The level at which the bound method that ``cls.where`` takes may be called for an ``x``,
        following where it is returned or stored; :data:`YES` when it may be called in ``where``
        itself or the trail is too long. ``trail`` holds what is already on the way."""
        if self.tree_of is None or len(trail) > _MAX_TRAIL:
            return YES
        key = (id(x), id(cls), where, method, lookup)
        known = self._taken_memo.get(key)
        if known is None:
            known = self._taken_memo[key] = self._follow(x, cls, where, method, lookup, trail)
        return known

    def _follow(
        self,
        x: ClassInfo,
        cls: ClassInfo,
        where: str,
        method: str,
        lookup: bool,
        trail: frozenset[str],
    ) -> int:
        assert self.tree_of is not None
        func = self._method_node(cls, where)
        if func is None or not [*func.args.posonlyargs, *func.args.args]:
            return YES
        me = [*func.args.posonlyargs, *func.args.args][0].arg
        nodes = self._flow(func).taken(me, method, lookup)
        if not nodes:
            return NO  # the text matched inside a string (a docstring naming it)
        level = NO
        for node in nodes:
            found = self._flow(func).destinations(node, me)
            if found is None:
                return YES
            level = max(level, self._reached(x, found, cls, where, trail))
            if level == YES:
                return YES
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
            known = self._ends.get(memo)
            if known is None:
                if destination == RETURNED:
                    known = self._result_called(x, where, trail | {key})
                else:
                    known = self._attribute_called(x, destination[len(STORED) :], trail | {key})
                self._ends[memo] = known
            level = max(level, known)
        return level

    def _result_called(self, x: ClassInfo, method: str, trail: frozenset[str]) -> int:
        """The level at which the result of a method ``method`` may be called for an ``x``."""
        level = UNTYPED if self.reach.foreign.get(method) else NO
        own = (Receiver.SELF, Receiver.CLS, Receiver.SUPER)
        for call, site, module in self.reach.calls(method):
            if call.receiver not in own or site is None:
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
        for call, site, module in self.reach.calls(attr):
            own = call.receiver in (Receiver.SELF, Receiver.CLS)
            if own and site is not None and self.reach.project.in_mro(site, x):
                level = max(level, self.reach.call_runs(x, call, site, module))
        if level != YES:
            places = [
                (cls, where, False)
                for cls, where in self.reach.escaping.get(attr, ())
                if self.reach.project.in_mro(cls, x)
            ]
            level = max(level, self.reach.best(x, attr, places, trail) or NO)
        return level

    def _call_destinations(self, site: ClassInfo, call: CallSite) -> frozenset[str] | None:
        """Where the value of ``call`` goes in its method (``None``: anywhere)."""
        assert self.tree_of is not None
        func = self._method_node(site, call.caller)
        if func is None or not [*func.args.posonlyargs, *func.args.args]:
            return None
        me = [*func.args.posonlyargs, *func.args.args][0].arg
        for node in ast.walk(func):
            if (
                isinstance(node, ast.Call)
                and node.lineno == call.line
                and node.col_offset + 1 == call.col
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == call.method
            ):
                return self._flow(func).destinations(node, me)
        return None

    def _method_node(self, cls: ClassInfo, name: str) -> Function | None:
        """The last ``def name`` of ``cls``'s body, the class statement found once."""
        assert self.tree_of is not None
        if id(cls) not in self._methods:
            self._methods[id(cls)] = class_defs(cls, self.tree_of)
        found = self._methods[id(cls)].get(name)
        return found[-1] if found else None

    def _flow(self, func: Function) -> Flow:
        known = self._flows.get(id(func))
        if known is None or known.func is not func:
            known = self._flows[id(func)] = Flow(func)
        return known

    def _named_elsewhere(self, attr: str) -> bool:
        """Whether a file of the project writes ``.<attr>`` on an object other than
        ``self``/``cls`` (the stored method may be read and called there)."""
        known = self._elsewhere.get(attr)
        if known is None:
            project = self.reach.project
            known = self._elsewhere[attr] = any(
                (text := project.text(module.file.path)) is not None
                and named_on_other_objects(text, attr)
                for module in modules_naming(project, attr)
            )
        return known
