"""Call-site evidence: calls in the project that the override provably rejects.

A call proves a crash (``error``) when Python is certain to dispatch it to the override:

* ``self.m(...)`` inside a method ``f`` of a class ``A`` in the MRO of the overriding class
  (or of a subclass that inherits the override), where that class inherits ``f`` from ``A``;
* ``super().m(...)`` in a subclass whose next definition of ``m`` is the override;
* ``C(...).m(...)`` or ``x = C(...); x.m(...)`` where ``C`` resolves to a class whose
  ``m`` is the override.

A receiver only annotated as a base class (``x: Base``) might be any subclass, so such a call
is shown as ``warning`` evidence. So is a ``self``/``super()`` call that cannot run for any
class inheriting the override (:mod:`harness.overrides.reach`: a guard excludes it, or the
calling method is reached only through methods those classes override), with the reason.
The rejection is decided by binding the call's shape against the override's signature
(:mod:`harness.overrides.binding`); a call the base signature rejects too proves nothing
about the override and is not used.
"""

from __future__ import annotations

from typing import NamedTuple

from harness.overrides.binding import CallShape, bind_method
from harness.overrides.callsites import CallSite, Receiver
from harness.overrides.compare import is_catch_all
from harness.overrides.reach import Reach
from harness.overrides.resolve import ClassInfo, ModuleInfo, Project
from harness.overrides.signature import MethodKind, Signature


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


def shape_of(call: CallSite) -> CallShape:
    """The argument shape of a recorded call."""
    return CallShape(call.n_positional, call.keywords, call.star, call.starstar)


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


class EvidenceIndex:
    """Call sites of the whole project (the tree and the modules read from outside it) by
    called method name, gathered on first request from the files that call that name (other
    files' calls stay encoded)."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._by_method: dict[str, list[CallEntry]] = {}
        self._forwarded: dict[str, list[Forwarded]] = {}
        self.reach = Reach(project, self.calls)

    def release(self) -> None:
        """Drop the gathered call sites and break the index <-> reach reference cycle, so that
        the project is freed at once by reference counting when the check ends (see
        :meth:`Project.release`); the index is unusable afterwards."""
        self._by_method.clear()
        self._forwarded.clear()
        self.reach.release()

    def calls(self, name: str) -> list[CallEntry]:
        """Every call of a method ``name``: the call, its class (``None`` at module level) and
        its module."""
        found = self._by_method.get(name)
        if found is None:
            found = self._by_method[name] = []
            for module in self.project.all_files():
                if name not in module.summary.called:
                    continue
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
            for outer, site, module in self.calls(call.caller):
                if outer.star or outer.starstar or outer.receiver is Receiver.SUPER:
                    continue  # unknown arguments, or a super() chain: not followed
                renamed = outer._replace(method=name)
                found.append(Forwarded(renamed, site, module, cls, call.caller))
        return found

    def proofs(
        self,
        cls: ClassInfo,
        name: str,
        override: Signature,
        base: Signature | None = None,
        within: ClassInfo | None = None,
    ) -> list[Proof]:
        """Calls that reach ``cls``'s ``name`` and that its signature rejects (and ``base``'s
        accepts), best first; with ``within``, only calls on instances of that class or of
        its subclasses."""
        if override.is_property:
            return []
        calls = self.calls(name)
        forwarded = self.forwarded(name)
        if not calls and not forwarded:
            return []
        project = self.project
        qualname = f"{cls.qualname}.{name}"
        inheritors = [
            x
            for x in project.inheritors(cls, name)
            if not project.shadowed(x, name) and (within is None or project.in_mro(within, x))
        ]
        out: list[Proof] = []
        seen: set[tuple[str, int, int]] = set()
        reach = self.reach

        def add(
            call: CallSite,
            module: ModuleInfo,
            certain: bool,
            *,
            through: bool = True,
            unreached: str | None = None,
            via: str | None = None,
        ) -> None:
            key = (module.file.display, call.line, call.col)
            if key in seen:
                return
            shape = shape_of(call)
            error = bind_method(shape, override, qualname, through_instance=through)
            if error is None:
                return
            if (
                base is not None
                and not base.is_property
                and bind_method(shape, base, name, through_instance=through)
            ):
                return  # wrong against the base as well: not evidence about this override
            seen.add(key)
            out.append(Proof(call, module, error, certain, unreached, via))

        entries: list[tuple[CallSite, ClassInfo | None, ModuleInfo, Forwarded | None]]
        entries = [(c, s, m, None) for c, s, m in calls]
        entries.extend((f.call, f.site, f.module, f) for f in forwarded)
        for call, site_cls, module, hop in entries:
            via = None if hop is None else f"{hop.forwarder.qualname}.{hop.method}(*args, **kwargs)"

            def hops(x: ClassInfo, hop: Forwarded | None = hop) -> bool:
                """The forwarding method is what ``x`` dispatches the outer call to."""
                return hop is None or project.definer(x, hop.method) is hop.forwarder

            if call.receiver in (Receiver.SELF, Receiver.CLS) and site_cls is not None:
                # Runs on an instance (or, for `cls`, the class) of some inheritor X if X
                # inherits the calling method and that method can run for X.
                on_class = call.receiver is Receiver.CLS
                if on_class and override.kind is MethodKind.INSTANCE:
                    continue  # `cls.m(obj, ...)` passes self explicitly: shape unknown
                why: str | None = None
                for x in inheritors:
                    if not project.in_mro(site_cls, x) or not hops(x):
                        continue
                    inherits = project.definer(x, call.caller) is site_cls
                    if not inherits and not reach.runs(x, site_cls, call.caller):
                        continue  # x overrides the caller and never reaches this one
                    why = reach.why_not(x, call, site_cls, module)
                    if why is None:
                        add(call, module, True, through=not on_class, via=via)
                        break
                else:
                    if why is not None:
                        add(call, module, False, through=not on_class, unreached=why, via=via)
            elif call.receiver is Receiver.SUPER and site_cls is not None:
                start = site_cls
                if call.receiver_class is not None:
                    start = project.resolve_class(module, call.receiver_class) or site_cls
                if project.definer(site_cls, name, after=start) is cls and (
                    within is None or project.in_mro(within, site_cls)
                ):
                    why = reach.why_not(site_cls, call, site_cls, module)
                    add(call, module, why is None, unreached=why)
            elif call.receiver is Receiver.CONSTRUCTED and call.receiver_class is not None:
                target = project.resolve_class(module, call.receiver_class)
                if target is not None and target in inheritors and hops(target):
                    add(call, module, True, via=via)
            elif call.receiver is Receiver.ANNOTATED and call.receiver_class is not None:
                target = project.resolve_class(module, call.receiver_class)
                if target is None or not hops(target):
                    continue
                related = project.in_mro(cls, target) or project.in_mro(target, cls)
                if within is not None:
                    related = related and (
                        project.in_mro(within, target) or project.in_mro(target, within)
                    )
                if related and not project.shadowed(target, name):
                    add(call, module, False, via=via)
        out.sort(
            key=lambda p: (
                not p.certain,
                p.unreached is not None,
                p.module.file.display,
                p.call.line,
            )
        )
        return out
