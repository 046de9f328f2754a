"""Whether a call inside a method can run for an instance of a class: :meth:`Reach.verdict`
answers :data:`YES`, :data:`UNTYPED` (only objects of unknown type, or typed as a base, lead there)
or :data:`NO`, with why (:mod:`.bound` follows the bound methods a method takes)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from harness.overrides.facts.callsites import CallSite, Receiver
from harness.overrides.facts.records import (
    ANY_NAME,
    GUARD_IDENTITY,
    GUARD_ISINSTANCE,
    Atom,
    ForeignCall,
    Guard,
)
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project

OWN = (Receiver.SELF, Receiver.CLS, Receiver.SUPER)
"""Receivers that dispatch on the instance the method runs for."""
_MAX_DEPTH = 60
_QUOTED_NAMES = (re.compile(r"'([A-Za-z_]\w*)'"), re.compile(r'"([A-Za-z_]\w*)"'))
NO = 0
"""The method cannot run for the class."""
UNTYPED = 1
"""It runs only if a call on an object of unknown type (or typed as a base) holds one."""
YES = 2
"""It runs: an entry point, or a path of calls on ``self``/``cls``/the class itself."""
Hop = tuple[CallSite, ClassInfo, ModuleInfo]
"""A call on the way to a method: the call, the class it is written in, and its module."""
Skip = Callable[[CallSite, ClassInfo, ModuleInfo], bool]
"""Whether a path may not go through a call (a condition of it is decided false)."""
CallIndex = Callable[[str], list[tuple[CallSite, ClassInfo | None, ModuleInfo]]]
"""``calls(name)``: every call of a method of that name, with its class and module."""
Taken = Callable[[ClassInfo, ClassInfo, str, str, bool, frozenset[str]], int]
"""``taken(x, cls, where, method, lookup, trail)``: the level at which the bound method ``method``
that ``cls.where`` takes may be called for an ``x`` (:meth:`.bound.Bound.taken`)."""


def atom_holds(project: Project, x: ClassInfo, module: ModuleInfo, atom: Atom) -> bool | None:
    """Whether an ``isinstance``/identity ``atom`` (written in ``module``) holds for an ``x``;
    ``None`` when the code does not decide it (a class not found, or a base of ``x`` not read
    that may be one of them)."""
    if atom.kind == GUARD_ISINSTANCE:
        targets = [project.resolve_class(module, n) for n in atom.names]
        if any(t is None for t in targets):
            return None
        holds = any(t is not None and project.in_mro(t, x) for t in targets)
        if not holds and not project.fully_resolved(x):
            return None  # an unresolved base might be one of them
        return holds != atom.negated
    if atom.kind == GUARD_IDENTITY:
        method, name = atom.names
        target = project.resolve_class(module, name)
        if target is None or not project.fully_resolved(x):
            return None
        same = project.definer(x, method) is project.definer(target, method)
        return same != atom.negated
    return None


def quoted_names(text: str) -> set[str]:
    """The identifiers ``text`` writes between two quotes of one kind (``'m'``, ``"m"``): a word
    between a quote and an apostrophe (``"Can't"``) is none. A scan per quote: a literal start
    is fast."""
    return {name for quoted in _QUOTED_NAMES for name in quoted.findall(text)}


class Reach:
    """Reachability of methods for instances of a class, over the tree's call sites."""

    def __init__(
        self, project: Project, calls: CallIndex, follow: Callable[[Reach], Taken]
    ) -> None:
        self.project = project
        self.calls = calls
        self.taken = follow(self)
        self._quoted: set[str] | None = None
        self._interface: dict[tuple[str, str], bool] = {}
        self._children: dict[str, list[ClassInfo]] | None = None
        """The last name of an unresolved base -> the tree's classes written deriving from it
        (gathered on first use)."""
        self.foreign: dict[str, list[tuple[ForeignCall, ModuleInfo]]] = {}
        self.guards: dict[tuple[int, int, int], Guard] = {}
        prefixes: set[str] = set()
        for module in project.all_files():
            facts = module.summary.dispatch
            for call in facts.foreign:
                self.foreign.setdefault(call.method, []).append((call, module))
            for guard in facts.guards:
                self.guards[(id(module), guard.line, guard.col)] = guard
            prefixes.update(facts.prefixes)
        self.prefixes = tuple(sorted(prefixes))
        self.escaping: dict[str, list[tuple[ClassInfo, str]]] = {}
        """Method name -> ``(class, method)`` where ``self.<name>`` escapes (``""``: in the
        class body)."""
        self._dynamic: list[tuple[ClassInfo, str, str]] = []
        """``(class, prefix, method)``: ``getattr(self, <prefix> + ...)`` in the class's method."""
        for cls in project.all_classes():
            if cls.facts is not None:
                for name, where in cls.facts.escapes:
                    self.escaping.setdefault(name, []).append((cls, where))
                self._dynamic.extend((cls, prefix, where) for prefix, where in cls.facts.dynamic)
        self._memo: dict[tuple[int, int, str], int] = {}
        self._active: set[tuple[int, int, str]] = set()
        self._tainted = False
        self.cut = False
        """Whether the last :meth:`path` search stopped at its depth limit."""

    def release(self) -> None:
        """Drop what was gathered and the two callables (reference cycles); unusable afterwards."""
        del self.calls, self.taken  # each refers back to this reach's owner or to it
        self._children = None
        gathered = (self.foreign, self.guards, self.escaping, self._dynamic)
        for table in (*gathered, self._memo, self._interface):
            table.clear()

    # -- the question ----------------------------------------------------------------------

    def verdict(
        self, x: ClassInfo, call: CallSite, owner: ClassInfo, module: ModuleInfo
    ) -> tuple[int, str | None]:
        """Whether ``call`` (written in ``owner.<call.caller>``) runs with ``self`` an instance
        of ``x`` (:data:`YES`, :data:`UNTYPED` or :data:`NO`), and why not when not YES."""
        guarded = self.guard_excludes(x, call, module)
        if guarded is not None:
            return NO, guarded
        level = self.runs(x, owner, call.caller)
        if level == YES:
            return YES, None
        if level == UNTYPED:
            return UNTYPED, self._untyped_reason(x, owner, call.caller)
        return NO, self._unreached_reason(x, owner, call.caller)

    def guard_excludes(self, x: ClassInfo, call: CallSite, module: ModuleInfo) -> str | None:
        """A guard around ``call`` that is false for instances of ``x``, described."""
        guard = self.guards.get((id(module), call.line, call.col))
        if guard is None:
            return None
        project = self.project
        for atom in guard.atoms:
            where = f"{module.file.display}:{atom.line}"
            if atom.kind in (GUARD_ISINSTANCE, GUARD_IDENTITY):
                if atom_holds(project, x, module, atom) is not False:
                    continue
                if atom.kind == GUARD_ISINSTANCE:
                    names = ", ".join(atom.names)
                    test = f"isinstance(self, {names if len(atom.names) == 1 else f'({names})'})"
                    said = f"{test} is {'false' if atom.negated else 'true'} (at {where})"
                else:
                    method, name = atom.names
                    test = f"type(self).{method} is {'not ' if atom.negated else ''}{name}.{method}"
                    said = f"{test} (tested at {where})"
                return f"it runs only when {said}, which it is not for {x.qualname}"
            method, param = atom.names
            definer = project.definer(x, method)
            if definer is None or method not in definer.methods:
                continue
            has = any(p.name == param for p in definer.methods[method].params)
            if has == atom.negated:
                state, actual = ("lacks", "has") if has else ("has", "lacks")
                return (
                    f"it runs only when {method}() {state} a parameter '{param}' (tested at "
                    f"{where}), and {definer.qualname}.{method}() {actual} one"
                )
        return None

    # -- reachability ----------------------------------------------------------------------

    def runs(self, x: ClassInfo, owner: ClassInfo, method: str) -> int:
        """Whether ``owner.method`` can run with ``self`` an instance of ``x``: :data:`YES`,
        :data:`UNTYPED` or :data:`NO`."""
        if not method:
            return YES  # a module-level function: anyone may call it
        key = (id(x), id(owner), method)
        known = self._memo.get(key)
        if known is not None:
            return known
        if key in self._active or len(self._active) > _MAX_DEPTH:
            self._tainted = True  # no new reach along a cycle; do not memoise what used this
            return YES if len(self._active) > _MAX_DEPTH else NO
        outer_taint = self._tainted
        self._tainted = False
        self._active.add(key)
        try:
            result = self._runs(x, owner, method)
        finally:
            self._active.discard(key)
        if result == YES or not self._tainted:
            self._memo[key] = result
        self._tainted = self._tainted or outer_taint
        return result

    def _runs(self, x: ClassInfo, owner: ClassInfo, method: str) -> int:
        project = self.project
        if not project.in_mro(owner, x):
            return NO
        best = NO
        if project.definer(x, method) is owner:
            best = self._dispatched(x, owner, method)
            if best == YES:
                return YES
        # super().method() in a class before `owner` in x's MRO that lands on owner's method.
        for call, site, module in self._super_landings(x, owner, method):
            best = max(best, self.call_runs(x, call, site, module))
            if best == YES:
                return YES
        return best

    # -- a witness path ----------------------------------------------------------------------

    def path(
        self,
        x: ClassInfo,
        owner: ClassInfo,
        method: str,
        skip: Skip | None = None,
        seen: set[tuple[int, str]] | None = None,
        depth: int = 0,
    ) -> list[Hop] | None:
        """The calls of one path along which ``owner.method`` runs for an ``x``, the entry's call
        first, over calls ``skip`` keeps; ``None`` when there is none (proving nothing when
        :attr:`cut`). ``seen``: the methods on the way, or known to lead nowhere."""
        if seen is None:
            self.cut, seen = False, set[tuple[int, str]]()
        project = self.project
        if not method:
            return []
        key = (id(owner), method)
        if key in seen:
            return None  # on the way already, or known to lead nowhere
        if depth > _MAX_DEPTH:
            self.cut = True
            return None
        seen.add(key)
        if not project.in_mro(owner, x):
            return None
        candidates: list[Hop] = []
        if project.definer(x, method) is owner:
            if self._dispatched(x, owner, method, hops=False) == YES:
                return []  # an entry: no call of the tree on self/cls leads there
            candidates.extend(self.own_calls(x, method, (Receiver.SELF, Receiver.CLS)))
        candidates.extend(self._super_landings(x, owner, method))
        for call, site, module in candidates:
            if self.call_runs(x, call, site, module) != YES:
                continue
            if skip is not None and skip(call, site, module):
                continue
            before = self.path(x, site, call.caller, skip, seen, depth + 1)
            if before is not None:
                return [*before, (call, site, module)]
        return None

    def _super_landings(self, x: ClassInfo, owner: ClassInfo, method: str) -> Iterator[Hop]:
        """``super().method()`` calls in classes of ``x``'s MRO that land on ``owner``'s."""
        for call, site, module in self.own_calls(x, method, (Receiver.SUPER,)):
            start = self.resolved(module, call.receiver_class) or site
            if self.project.definer(x, method, after=start) is owner:
                yield call, site, module

    def own_calls(
        self, x: ClassInfo, method: str, receivers: tuple[Receiver, ...] = OWN
    ) -> Iterator[Hop]:
        """The calls of ``method`` on ``receivers`` written in classes of ``x``'s MRO."""
        for call, site, module in self.calls(method):
            if call.receiver in receivers and site is not None and self.project.in_mro(site, x):
                yield call, site, module

    def _dispatched(self, x: ClassInfo, owner: ClassInfo, method: str, hops: bool = True) -> int:
        """Whether ``x_instance.method(...)`` is called from anywhere that can hold an ``x``: a
        method the tree never calls on ``owner``'s hierarchy is an entry point; else :data:`YES`
        needs a call on ``self``/``cls`` on a running path, or on an object known or annotated to
        be of a class of ``x``'s MRO, or (a public method) on an object of unknown type."""
        project = self.project
        named, wildcard = self._escapes(method, x)
        dunder = len(method) > 4 and method.startswith("__") and method.endswith("__")
        if dunder or YES in (named, wildcard):
            return YES
        resolved = project.fully_resolved(x)
        internal = 0 if named is None else 1  # it escapes only where an x may not run
        best = UNTYPED if wildcard == UNTYPED else NO
        untyped = named == UNTYPED
        unknown = False  # a call on an object of unknown type names the method
        for other, module in self.foreign.get(method, ()):
            if other.receiver_class is None and self._rejects(other.rejected, module, x):
                internal += 1
                continue
            target = self.resolved(module, other.receiver_class)  # None: an unknown object
            if target is x:
                return YES
            if target is None:
                unknown = True
            else:
                internal += self.related(target, owner)
        for call, site, module in self.calls(method):
            if call.receiver in (Receiver.SELF, Receiver.CLS) and site is not None:
                if hops and project.in_mro(site, x):
                    best = max(best, self.call_runs(x, call, site, module))
                    if best == YES:
                        return YES
                internal += self.related(site, owner)
            elif call.receiver in (Receiver.CONSTRUCTED, Receiver.ANNOTATED):
                target = self.resolved(module, call.receiver_class)
                if target is x:
                    return YES
                annotated = call.receiver is Receiver.ANNOTATED
                if annotated and target is not None and project.in_mro(target, x):
                    return YES  # an annotation names its class or any subclass of it
                if target is None:
                    unknown = True
                else:
                    internal += self.related(target, owner)
        if unknown and not method.startswith("_"):
            # A call on an object of unknown type may hold an x: the public method it names is
            # reachable by it, whatever calls of the same name other classes receive.
            return YES
        untyped = untyped or unknown
        if internal == 0:
            # No call in the class's own hierarchy: a public method is an entry point for the
            # project's users; a private one is reached only by the calls the tree makes.
            return UNTYPED if untyped and resolved and method.startswith("_") else YES
        if self._unread_may_call(x, method) and self._unread_interface(x, method):
            return YES
        if untyped or self._unread_may_call(x, method):
            return max(best, UNTYPED)
        return best

    def _unread_may_call(self, x: ClassInfo, method: str) -> bool:
        """Whether a base the checker did not read may call ``method`` on an ``x``: it is
        public and ``x``'s MRO has such a base (a hook of that base, for all the tree says)."""
        return not method.startswith("_") and not self.project.fully_resolved(x)

    def _unread_interface(self, x: ClassInfo, method: str) -> bool:
        """Whether ``method`` belongs to the interface of an unread base of ``x``: most (and at
        least two) of the tree's classes deriving from that base directly define it."""
        if self._children is None:
            self._children = {}
            for cls in self.project.classes:
                for written in dict.fromkeys(b.rpartition(".")[2] for b in cls.unresolved):
                    self._children.setdefault(written, []).append(cls)
        for base in {b.rpartition(".")[2] for c in self.project.mro(x) for b in c.unresolved}:
            key = (base, method)
            known = self._interface.get(key)
            if known is None:
                children = self._children.get(base, [])
                definers = sum(1 for c in children if method in c.methods)
                known = self._interface[key] = definers > 1 and 2 * definers > len(children)
            if known:
                return True
        return False

    def related(self, a: ClassInfo, b: ClassInfo) -> bool:
        """Whether one of ``a`` and ``b`` derives from the other."""
        return self.project.in_mro(b, a) or self.project.in_mro(a, b)

    def call_runs(self, x: ClassInfo, call: CallSite, site: ClassInfo, module: ModuleInfo) -> int:
        if self.guard_excludes(x, call, module) is not None:
            return NO
        return self.runs(x, site, call.caller)

    def _escapes(self, method: str, x: ClassInfo) -> tuple[int | None, int | None]:
        """The best levels at which ``method`` is called from outside the call graph for an ``x``
        (``None``: no such place): through places naming it (``self.m`` uncalled, ``getattr(self,
        "m")`` or ``"pre" + k``; a lookup of any name when the tree writes ``"m"``), and through
        lookups of any name."""
        if any(method.startswith(prefix) for prefix in self.prefixes):
            return YES, None
        in_mro = self.project.in_mro
        named = [
            (cls, where, False) for cls, where in self.escaping.get(method, ()) if in_mro(cls, x)
        ]
        wildcard: list[tuple[ClassInfo, str, bool]] = []
        for cls, where, any_name in self._lookups(x, method):
            (wildcard if any_name else named).append((cls, where, True))
        if wildcard and method in self._quoted_names():
            named.extend(wildcard)  # the tree names it for a lookup: how it is reached
            wildcard = []
        return self.best(x, method, named), self.best(x, method, wildcard)

    def _lookups(self, x: ClassInfo, method: str) -> Iterator[tuple[ClassInfo, str, bool]]:
        """The ``getattr(self, ...)`` lookups in ``x``'s classes that may find ``method``: the
        class, the method holding it, and whether it looks up any name."""
        for cls, prefix, where in self._dynamic:
            if method.startswith(prefix) and self.project.in_mro(cls, x):
                yield cls, where, prefix == ANY_NAME

    def _quoted_names(self) -> set[str]:
        """Every identifier the tree's files write as a string literal (``"forward_cpu"``),
        found once, on first need, in the text the run read."""
        if self._quoted is None:
            self._quoted = set()
            for module in self.project.files:
                self._quoted.update(quoted_names(self.project.text(module.file.path) or ""))
        return self._quoted

    def best(
        self,
        x: ClassInfo,
        method: str,
        places: list[tuple[ClassInfo, str, bool]],
        trail: frozenset[str] = frozenset(),
    ) -> int | None:
        """The best level at which one of ``places`` (a class, its method or ``""`` for the
        class body, and whether the place is a ``getattr(self, ...)`` rather than
        ``self.<method>``) lets ``method`` be called for an ``x``; ``None`` for no places."""
        level: int | None = None
        for cls, where, lookup in places:
            if not where:
                return YES
            if where == method:
                continue  # a method taking itself is not how it is reached
            runs = self.runs(x, cls, where)
            if runs != NO:
                runs = min(runs, self.taken(x, cls, where, method, lookup, trail))
            if runs == YES:
                return YES
            level = max(runs, NO if level is None else level)
        return level

    def _rejects(self, rejected: tuple[str, ...], module: ModuleInfo, x: ClassInfo) -> bool:
        return any(
            (t := self.resolved(module, n)) is not None and self.project.in_mro(t, x)
            for n in rejected
        )

    def resolved(self, module: ModuleInfo, name: str | None) -> ClassInfo | None:
        """The class ``name`` (a receiver's class as written) names in ``module``."""
        return None if name is None else self.project.resolve_class(module, name)

    # -- explanation -------------------------------------------------------------------------

    def _untyped_reason(self, x: ClassInfo, owner: ClassInfo, method: str) -> str:
        """Name where ``owner.method`` is called on objects not known to be an ``x``."""
        chain: list[str] = []
        seen: set[tuple[int, str]] = set()
        while True:
            places = self._untyped_places(x, method)
            target = f"{owner.qualname}.{method}()"
            if places:
                shown = ", ".join(places[:3]) + ("" if len(places) <= 3 else ", ...")
                head = f"{target} is called only on objects whose class is unknown ({shown})"
                return head + "".join(f", which {c}" for c in reversed(chain))
            nxt = self._untyped_caller(x, owner, method)
            end = self._untyped_end(x, owner, method) if nxt is None else None
            if end is not None:
                return end + "".join(f", which {c}" for c in reversed(chain))
            if nxt is None or (id(nxt[0]), nxt[1]) in seen or len(chain) > 8:
                return f"{target} is reached only through objects whose class is unknown"
            seen.add((id(nxt[0]), nxt[1]))
            chain.append(f"calls {target}")
            owner, method = nxt

    def _untyped_end(self, x: ClassInfo, owner: ClassInfo, method: str) -> str | None:
        """Why ``owner.method``, which no untyped call names, is reached only untyped: taken as
        a bound method (in a method of ``x``'s classes running for an ``x``) that goes only there,
        or called by an unread base, or found by a lookup of any name; ``None`` when none says it."""
        target = f"{owner.qualname}.{method}()"
        quoted = method in self._quoted_names()
        places = [(c, w) for c, w in self.escaping.get(method, ()) if self.project.in_mro(c, x)]
        places.extend(
            (c, w) for c, w, any_name in self._lookups(x, method) if quoted or not any_name
        )
        taking = list(
            dict.fromkeys(
                f"{cls.qualname}.{where}()"
                for cls, where in places
                if where and where != method and self.runs(x, cls, where) != NO
            )
        )
        if taking:
            return (
                f"{target} is taken as a bound method (self.{method} or getattr(self, ...)) "
                f"in {', '.join(taking[:2])}, and where it goes it is called only through "
                "objects whose class is unknown"
            )
        if self._unread_may_call(x, method):
            names = dict.fromkeys(b for c in self.project.mro(x) for b in c.unresolved)
            shown = ", ".join(list(names)[:2]) + ("" if len(names) <= 2 else ", ...")
            bases = f"a base ({shown})" if len(names) == 1 else f"one of its bases ({shown})"
            return (
                f"{target} runs only if {bases}, which the checker did not read, "
                f"calls it ({self._unreached_reason(x, owner, method)})"
            )
        lookups = [
            f"{cls.qualname}.{where}()"
            for cls, where, any_name in self._lookups(x, method)
            if any_name and where and self.runs(x, cls, where) == UNTYPED
        ]
        if lookups:
            return (
                f"{target} runs only if a getattr(self, <any name>) in {', '.join(lookups[:2])}, "
                "reached only through objects whose class is unknown, finds it"
            )
        return None

    def _untyped_places(self, x: ClassInfo, method: str) -> list[str]:
        project = self.project
        places: dict[str, None] = {}
        for other, module in self.foreign.get(method, ()):
            if other.receiver_class is None and not self._rejects(other.rejected, module, x):
                places[f"obj.{method}() in {module.file.display}"] = None
            elif (
                other.receiver_class is not None
                and self.resolved(module, other.receiver_class) is None
            ):
                places[f"self.<attr>.{method}() in {module.file.display}"] = None
        for call, _, module in self.calls(method):
            if call.receiver not in (Receiver.CONSTRUCTED, Receiver.ANNOTATED):
                continue
            target = self.resolved(module, call.receiver_class)
            if target is None or (
                call.receiver is Receiver.ANNOTATED
                and target is not x
                and project.in_mro(target, x)
            ):
                places[f"{module.file.display}:{call.line}"] = None
        return list(places)

    def _untyped_caller(
        self, x: ClassInfo, owner: ClassInfo, method: str
    ) -> tuple[ClassInfo, str] | None:
        """A ``self`` call of ``owner.method`` whose own method is reached only untyped."""
        for call, site, module in self.own_calls(x, method):
            if call.caller and self.call_runs(x, call, site, module) == UNTYPED:
                return site, call.caller
        return None

    def _unreached_reason(self, x: ClassInfo, owner: ClassInfo, method: str) -> str:
        """Name the callers of ``owner.method`` and why each does not run for ``x``."""
        project = self.project

        def why(shown: str, site: ClassInfo, caller: str) -> str:
            definer = project.definer(x, caller)
            if definer is not None and definer is not site:
                return f"{shown}, which {definer.qualname} overrides without calling super()"
            return f"{shown}, which is itself not reached"

        callers: dict[str, str] = {}
        for call, site, module in self.own_calls(x, method):
            name = f"{site.qualname}.{call.caller}()"
            if name in callers:
                continue
            if self.guard_excludes(x, call, module) is not None:
                callers[name] = f"{name} (only under a guard that excludes it)"
            else:
                callers[name] = why(name, site, call.caller)
        for cls, where in self.escaping.get(method, ()):
            if where and project.in_mro(cls, x):
                name = f"{cls.qualname}.{where}()"
                callers.setdefault(name, why(f"{name} (as self.{method})", cls, where))
        rejected = any(other.rejected for other, _ in self.foreign.get(method, ()))
        target = f"{owner.qualname}.{method}()"
        if not callers:
            if rejected:
                return f"{target} is called only on objects checked not to be a {x.qualname}"
            return f"{target} is not called for a {x.qualname}"
        shown = sorted(callers.values())[:3]
        more = "" if len(callers) <= 3 else f" and {len(callers) - 3} more"
        tail = "; other callers check the object is not one" if rejected else ""
        return f"{target} runs only from {'; '.join(shown)}{more}{tail}"
