"""Calls in the project that an override provably rejects, one proof per kind of receiver
(:class:`_Prover`): an error where dispatch to the override is certain, else a warning saying why
(unreached, latent, decided false on every path, replaced, always raising, handled)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import NamedTuple

from harness.overrides.compare import is_catch_all
from harness.overrides.evidence.binding import CallShape, bind_method
from harness.overrides.evidence.bound import Bound
from harness.overrides.evidence.conditions import Conditions
from harness.overrides.evidence.deciders import deciders
from harness.overrides.evidence.defaults import left_at_none
from harness.overrides.evidence.named_classes import NamedClasses, needed
from harness.overrides.evidence.raises import Raisers
from harness.overrides.evidence.reach import NO, UNTYPED, YES, Hop, Reach
from harness.overrides.evidence.replacing import Replacing
from harness.overrides.facts.callsites import CallSite, Receiver
from harness.overrides.facts.signature import MethodKind, Signature
from harness.overrides.facts.wrappers import popped_keywords
from harness.overrides.model.classdefs import class_defs, single_def
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project


class Proof(NamedTuple):
    """A call the override rejects."""

    call: CallSite
    module: ModuleInfo
    error: str
    """The ``TypeError`` message, without the ``TypeError:`` prefix."""
    certain: bool
    """True when dispatch to the override is certain (``error`` severity)."""
    unreached: str | None = None
    """Why the call cannot run for the classes that inherit the override, when it cannot."""
    via: str | None = None
    """``Class.method(*args, **kwargs)`` that forwards the call's arguments to the override."""
    untyped: str | None = None
    """Why the call reaches the override only through an object of unknown type, when so."""
    guards: tuple[str, ...] = ()
    """The conditions the call runs under in its function (for certain proofs)."""
    subject: ClassInfo | None = None
    """The class whose instance ``self`` is at the call, for ``self``/``super()`` calls."""
    owner: ClassInfo | None = None
    """The class the call is written in, for ``self``/``super()`` calls."""


CallEntry = tuple[CallSite, ClassInfo | None, ModuleInfo]


class Forwarded(NamedTuple):
    """A call of a forwarding method, standing for the call that method makes."""

    call: CallSite
    """The outer call, renamed to the method its arguments reach."""
    site: ClassInfo | None
    module: ModuleInfo
    forwarder: ClassInfo
    """The class defining the forwarding method."""
    method: str
    """The forwarding method's name."""


class _Files(dict[str, Conditions]):
    """The conditions of each file read for evidence, by path, parsed once."""

    def __init__(self, text: Callable[[str], str | None]) -> None:
        super().__init__()
        self._text = text

    def __missing__(self, path: str) -> Conditions:
        found = self[path] = Conditions(self._text(path) or "")
        return found

    def tree(self, path: str) -> ast.Module:
        return self[path].tree


_SCANNED = 16
"""Names whose callers are found by testing every module before the modules are indexed by the
names they call (a ``--changed`` run asks about a few)."""


class EvidenceIndex:
    """Call sites of the whole project by called method name, gathered on first request from the
    files that call that name."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._by_method: dict[str, list[CallEntry]] = {}
        self._callers: dict[str, list[ModuleInfo]] = {}
        """Method name -> the modules calling it, in the project's order."""
        self._indexed = 0
        self._forwarded: dict[str, list[Forwarded]] = {}
        self._files = _Files(project.text)
        tree = self._files.tree  # not a method of the index: the deciders hold no cycle
        self.reach = Reach(project, self.calls, lambda reach: Bound(reach, tree).taken)
        self._named = NamedClasses(project, tree)
        self._deciders = deciders(project, self.reach, self._named, tree)
        """Each decides conditions of one kind, asked in turn (:mod:`.deciders`)."""
        self._raisers = Raisers(project, tree)
        self._replacing = Replacing(project, tree)
        self._picked: dict[int, list[ClassInfo]] = {}
        """Class id -> the classes of its MRO with a base bound to different classes."""

    def release(self) -> None:
        """Drop the gathered call sites and break the index <-> reach cycle, so reference counting
        frees the project; the index is unusable afterwards."""
        for table in (self._by_method, self._callers, self._forwarded, self._files, self._picked):
            table.clear()
        self.reach.release()

    def calls(self, name: str) -> list[CallEntry]:
        """Every call of a method ``name``: the call, its class (``None`` at module level) and
        its module."""
        found = self._by_method.get(name)
        if found is None:
            project = self.project
            if len(self._by_method) < _SCANNED:  # a few names: cheaper than the index
                callers = [m for m in project.all_files() if name in m.summary.called]
            else:
                if self._indexed < len(project.files) + len(project.external_files):
                    files = project.all_files()  # modules read from outside are added as needed
                    for module in files[self._indexed :]:
                        for called in module.summary.called:
                            self._callers.setdefault(called, []).append(module)
                    self._indexed = len(files)
                callers = self._callers.get(name, [])
            found = self._by_method[name] = []
            for module in callers:
                for cls in module.members:
                    found.extend((c, cls, module) for c in cls.summary.calls if c.method == name)
                found.extend((c, None, module) for c in module.summary.calls if c.method == name)
        return found

    def forwarded(self, name: str) -> list[Forwarded]:
        """Calls of ``g`` where ``K.g(self, *args, **kwargs)`` calls ``self.<name>(*args,
        **kwargs)``: the outer call's arguments are what ``name`` receives."""
        found = self._forwarded.get(name)
        if found is not None:
            return found
        found = self._forwarded[name] = []
        for call, cls, _ in self.calls(name):
            if cls is None or not (
                call.receiver is Receiver.SELF
                and call.star
                and call.starstar
                and not call.n_positional
                and not call.keywords
            ):
                continue
            forwarder = cls.methods.get(call.caller)
            if forwarder is None or not is_catch_all(forwarder):
                continue
            popped = self._popped(cls, call.caller)
            for outer, site, module in self.calls(call.caller):
                if outer.star or outer.starstar or outer.receiver is Receiver.SUPER:
                    continue  # unknown arguments, or a super() chain: not followed
                kept = tuple(k for k in outer.keywords if k not in popped)
                renamed = outer._replace(method=name, keywords=kept)
                found.append(Forwarded(renamed, site, module, cls, call.caller))
        return found

    def _popped(self, cls: ClassInfo, method: str) -> set[str]:
        """Keywords ``cls.method`` takes out of its ``**kwargs`` before forwarding them
        (``kwargs.pop("power")``): the forwarded call never passes them."""
        for func in class_defs(cls, self._files.tree).get(method, ()):
            if func.args.kwarg is not None:
                return set(popped_keywords(func, func.args.kwarg.arg))
        return set()

    def proofs(
        self,
        cls: ClassInfo,
        name: str,
        override: Signature,
        base: Signature | None = None,
        within: ClassInfo | None = None,
    ) -> list[Proof]:
        """Calls that reach ``cls``'s ``name`` and that its signature rejects (and ``base``'s
        accepts), best first; with ``within``, only calls on instances of that class or below."""
        if override.is_property:
            return []
        calls = self.calls(name)
        forwarded = self.forwarded(name)
        if not calls and not forwarded:
            return []
        prover = _Prover(self, cls, name, override, base, within)
        for call, site, module in calls:
            prover.prove(call, site, module, None)
        for hop in forwarded:
            prover.prove(hop.call, hop.site, hop.module, hop)
        out = [self._with_guards(p) if p.certain else p for p in prover.out]
        if any(p.certain for p in out):
            moot = self._replacing.replaced(cls, name)
            expected = None  # what an always-raising override raises instead of the TypeError
            if moot is None:
                raised = self._raisers.raised(cls, name)
                if raised is not None:
                    expected, said = raised
                    moot = f"{said}: the call fails either way"
            if moot is not None:
                out = [
                    p._replace(certain=False, untyped=moot)
                    if p.certain and not self._escapes_handler(p, expected)
                    else p
                    for p in out
                ]
        out.sort(key=_rank)
        return out

    def _escapes_handler(self, proof: Proof, expected: str | None) -> bool:
        """Whether a handler around ``proof``'s call catches ``expected`` (what an always-raising
        override raises) but not a ``TypeError``, which then escapes where the other was handled."""
        if not expected:
            return False
        handlers = (
            self._files[proof.module.file.path].finder(proof.call.line, proof.call.col).handled
        )
        if any(c is None or c & {"Exception", "BaseException", "TypeError"} for c in handlers):
            return False  # a handler takes the TypeError too
        return any(expected in c for c in handlers if c is not None)

    def _with_guards(self, proof: Proof) -> Proof:
        """``proof`` with the conditions on its path from the entry to the call, each once; a
        warning instead when the ``TypeError`` is handled around the call or a condition is decided
        false for the class."""
        call, module = proof.call, proof.module
        own = self._texts(call, module)
        caught = self._files[module.file.path].finder(call.line, call.col).caught
        x, owner = proof.subject, proof.owner
        why = None if caught is None else f"the TypeError is handled where it is raised ({caught})"
        if why is None and x is not None and owner is not None:
            why = self._decided(x, call, module)
        if why is not None:
            return proof._replace(certain=False, unreached=why, guards=own)
        if x is None or owner is None:
            return proof._replace(guards=own)
        banned: set[int] = set()  # entering calls that leave a needed parameter at None

        def skip(c: CallSite, _: ClassInfo, m: ModuleInfo) -> bool:
            return id(c) in banned or self._decided(x, c, m) is not None

        reach = self.reach
        hops = reach.path(x, owner, call.caller)
        why = next((w for c, _, m in hops or () if (w := self._decided(x, c, m)) is not None), None)
        first: str | None = None  # the first entering call found leaving a parameter at None
        while True:
            if why is not None:  # the path found does not run: search around it
                hops = reach.path(x, owner, call.caller, skip)
                if hops is None and not reach.cut:
                    return proof._replace(certain=False, unreached=first or why, guards=own)
            why = self._left_at_none(owner, call, module, hops[-1]) if hops else None
            if why is None or not hops:
                break
            first = first or why
            banned.add(id(hops[-1][0]))
        steps = [*((c, m) for c, _, m in hops or ()), (call, module)]
        guards = tuple(dict.fromkeys(t for c, m in steps for t in self._texts(c, m)))
        feature = next((w for c, m in steps if (w := self._feature_test(x, c, m))), None)
        feature = feature or self._picked_base(x, owner)
        if feature is not None:
            return proof._replace(certain=False, untyped=feature, guards=guards)
        return proof._replace(guards=guards)

    def _left_at_none(
        self, owner: ClassInfo, call: CallSite, module: ModuleInfo, entry: Hop
    ) -> str | None:
        """Why ``call`` does not run when ``owner.<call.caller>`` is entered by ``entry``: a
        condition of it needs a parameter that ``entry`` leaves at its default ``None``."""
        func = single_def(owner, call.caller, self._files.tree)
        sig = owner.methods.get(call.caller)
        if func is None or sig is None:
            return None
        tests = self._files[module.file.path].tests(call.line, call.col)
        bound_self = sig.kind is not MethodKind.STATIC
        found = left_at_none(func, bound_self, tests, entry[0])
        if found is None:
            return None
        text, name = found
        where = f"{entry[2].file.display}:{entry[0].line}"
        return (
            f"it runs only if {text} (at {module.file.display}:{call.line}), but the call "
            f"entering {owner.qualname}.{call.caller}() (at {where}) leaves {name} at its "
            "default None"
        )

    def _picked_base(self, x: ClassInfo, owner: ClassInfo) -> str | None:
        """Why ``owner``'s method runs for an ``x`` only if the branch that ran bound a base
        of ``x``'s MRO to the class the checker read: ``owner`` is reached through a base
        whose name is bound to different classes above its ``class`` statement."""
        project = self.project
        picked = self._picked.get(id(x))
        if picked is None:  # once per class: a chain of n classes is not walked n times
            picked = self._picked[id(x)] = [c for c in project.mro(x) if c.alternatives]
        for cls in picked:
            for base, written, lines in cls.alternatives:
                if project.in_mro(owner, base):
                    shown = ", ".join(str(n) for n in lines[:6]) + (
                        "" if len(lines) <= 6 else ", ..."
                    )
                    return (
                        f"{cls.qualname} derives from {written}, which "
                        f"{cls.module.file.display} binds at lines {shown} before it, not "
                        f"always to {base.qualname}, the class the call is reached through"
                    )
        return None

    def _feature_test(self, x: ClassInfo, call: CallSite, module: ModuleInfo) -> str | None:
        """Why ``call`` runs for an ``x`` only if an object has an attribute the code does not say
        it has (``if hasattr(config, "a")``): which objects reach here for an ``x`` is not known."""
        where = f"{module.file.display}:{call.line}"
        for text, test, value in self._files[module.file.path].tests(call.line, call.col):
            for name, attr in needed(test, value):
                said = self._named.unstated(x, module, call.line, name, attr)
                if said is not None:
                    return (
                        f"it runs only if {text} (at {where}), a test for objects with {attr}; "
                        f"{said}"
                    )
        return None

    def _texts(self, call: CallSite, module: ModuleInfo) -> tuple[str, ...]:
        return self._files[module.file.path].at(call.line, call.col)

    def _decided(self, x: ClassInfo, call: CallSite, module: ModuleInfo) -> str | None:
        """Why ``call`` cannot run for an ``x``: a condition of it decided false, said."""
        where = f"{module.file.display}:{call.line}"
        for text, test, value in self._files[module.file.path].tests(call.line, call.col):
            for decider in self._deciders:
                why = decider.false_for(x, module, call.line, test, value)
                if why:
                    return f"it runs only if {text} (at {where}), but {why}"
        return self._raisers.before(x, module, call.line)


def _rank(proof: Proof) -> tuple[bool, bool, bool, str, int]:
    return (
        not proof.certain,
        proof.untyped is None,
        proof.unreached is not None,
        proof.module.file.display,
        proof.call.line,
    )


class _Prover:
    """The proofs of one override: one method per kind of receiver (see the module
    docstring), each deciding whether its call reaches the override and how surely."""

    def __init__(
        self,
        index: EvidenceIndex,
        cls: ClassInfo,
        name: str,
        override: Signature,
        base: Signature | None,
        within: ClassInfo | None,
    ) -> None:
        self.project = project = index.project
        self.reach = index.reach
        self.name = name
        self.cls = cls
        self.override = override
        self.base = base
        self.within = within
        self.qualname = f"{cls.qualname}.{name}"
        self.inheritors = [
            x
            for x in project.inheritors(cls, name)
            if not project.shadowed(x, name) and (within is None or project.in_mro(within, x))
        ]
        self.out: list[Proof] = []
        self.seen: set[tuple[str, int, int]] = set()

    def prove(
        self, call: CallSite, site: ClassInfo | None, module: ModuleInfo, hop: Forwarded | None
    ) -> None:
        """Add the proof ``call`` gives, if any."""
        if site is not None and call.receiver in (Receiver.SELF, Receiver.CLS):
            self.on_self(call, site, module, hop)
        elif site is not None and call.receiver is Receiver.SUPER and hop is None:
            self.on_super(call, site, module)
        elif call.receiver in (Receiver.CONSTRUCTED, Receiver.ANNOTATED):
            self.on_typed(call, module, hop)

    def _hops(self, x: ClassInfo, hop: Forwarded | None) -> bool:
        """The forwarding method is what ``x`` dispatches the outer call to."""
        return hop is None or self.project.definer(x, hop.method) is hop.forwarder

    def on_self(
        self, call: CallSite, site: ClassInfo, module: ModuleInfo, hop: Forwarded | None
    ) -> None:
        """``self.m(...)``/``cls.m(...)`` in ``site.<caller>``: an error when, for some class
        inheriting the override, the caller runs along a path of typed calls; a warning
        when only an untyped receiver reaches it, or when it cannot run (with the reason)."""
        on_class = call.receiver is Receiver.CLS
        if on_class and self.override.kind is MethodKind.INSTANCE:
            return  # `cls.m(obj, ...)` passes self explicitly: shape unknown
        project, reach = self.project, self.reach
        best: tuple[int, str | None] | None = None
        subject: ClassInfo | None = None
        for x in self.inheritors:
            if not project.in_mro(site, x) or not self._hops(x, hop):
                continue
            inherits = project.definer(x, call.caller) is site
            if not inherits and not reach.runs(x, site, call.caller):
                continue  # x overrides the caller and never reaches this one
            level, why = reach.verdict(x, call, site, module)
            if level == YES:
                best, subject = (YES, None), x
                break
            if best is None or level > best[0]:
                best = (level, why)
        if best is None:
            return
        self.add(call, module, *best, through=not on_class, hop=hop, subject=subject, owner=site)

    def on_super(self, call: CallSite, site: ClassInfo, module: ModuleInfo) -> None:
        """``super().m(...)`` in ``site``: the next ``m`` after ``site`` is the override."""
        project = self.project
        start = self.reach.resolved(module, call.receiver_class) or site
        if project.definer(site, self.name, after=start) is not self.cls:
            return
        if self.within is not None and not project.in_mro(self.within, site):
            return
        self.add(
            call, module, *self.reach.verdict(site, call, site, module), subject=site, owner=site
        )

    def on_typed(self, call: CallSite, module: ModuleInfo, hop: Forwarded | None) -> None:
        """``C(...).m(...)``: an error when ``C`` inherits the override; ``x: C`` then
        ``x.m(...)``: ``x`` may be any subclass of ``C``, so a warning."""
        target = self.reach.resolved(module, call.receiver_class)
        if target is None or not self._hops(target, hop):
            return
        if call.receiver is Receiver.CONSTRUCTED:
            if target in self.inheritors:
                self.add(call, module, YES, hop=hop)
            return
        related = self.reach.related(target, self.cls) and (
            self.within is None or self.reach.related(target, self.within)
        )
        if related and not self.project.shadowed(target, self.name):
            self.add(call, module, UNTYPED, hop=hop)

    def add(
        self,
        call: CallSite,
        module: ModuleInfo,
        level: int,
        why: str | None = None,
        *,
        through: bool = True,
        hop: Forwarded | None = None,
        subject: ClassInfo | None = None,
        owner: ClassInfo | None = None,
    ) -> None:
        """Record the proof if the override rejects the call and the base does not: an error at
        :data:`YES`, else a warning with ``why`` the call is unreached (:data:`NO`) or latent."""
        key = (module.file.display, call.line, call.col)
        if key in self.seen:
            return
        shape = CallShape(call.n_positional, call.keywords, call.star, call.starstar)
        error = bind_method(shape, self.override, self.qualname, through_instance=through)
        if error is None:
            return
        base = self.base
        if (
            base is not None
            and not base.is_property
            and bind_method(shape, base, self.name, through_instance=through)
        ):
            return  # wrong against the base as well: not evidence about this override
        self.seen.add(key)
        via = None if hop is None else f"{hop.forwarder.qualname}.{hop.method}(*args, **kwargs)"
        no, latent = (why if level == NO else None), (why if level == UNTYPED else None)
        self.out.append(
            Proof(call, module, error, level == YES, no, via, latent, subject=subject, owner=owner)
        )
