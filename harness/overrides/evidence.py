"""Call-site evidence: calls in the project that the override provably rejects.

A call proves a crash (``error``) when Python is certain to dispatch it to the override:

* ``self.m(...)`` inside a method ``f`` of a class ``A`` in the MRO of the overriding class
  (or of a subclass that inherits the override), where that class inherits ``f`` from ``A``;
* ``super().m(...)`` in a subclass whose next definition of ``m`` is the override;
* ``C(...).m(...)`` or ``x = C(...); x.m(...)`` where ``C`` resolves to a class whose
  ``m`` is the override.

A receiver only annotated as a base class (``x: Base``) might be any subclass, so such a call
is shown as ``warning`` evidence. The rejection is decided by binding the call's shape
against the override's signature (:mod:`harness.overrides.binding`).
"""

from __future__ import annotations

from typing import NamedTuple

from harness.overrides.binding import CallShape, bind_method
from harness.overrides.callsites import CallSite, Receiver
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


def shape_of(call: CallSite) -> CallShape:
    """The argument shape of a recorded call."""
    return CallShape(call.n_positional, call.keywords, call.star, call.starstar)


class EvidenceIndex:
    """Call sites of the whole project by called method name, gathered on first request from
    the files that call that name (other files' calls stay encoded)."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._by_method: dict[str, list[tuple[CallSite, ClassInfo | None, ModuleInfo]]] = {}

    def calls(self, name: str) -> list[tuple[CallSite, ClassInfo | None, ModuleInfo]]:
        """Every call of a method ``name``: the call, its class (``None`` at module level) and
        its module."""
        found = self._by_method.get(name)
        if found is None:
            found = self._by_method[name] = []
            for module in self.project.files:
                if name not in module.summary.called:
                    continue
                for cls in module.members:
                    found.extend((c, cls, module) for c in cls.summary.calls if c.method == name)
                found.extend((c, None, module) for c in module.summary.calls if c.method == name)
        return found

    def proofs(self, cls: ClassInfo, name: str, override: Signature) -> list[Proof]:
        """Calls that reach ``cls``'s ``name`` and that its signature rejects, best first."""
        if override.is_property:
            return []
        calls = self.calls(name)
        if not calls:
            return []
        project = self.project
        qualname = f"{cls.qualname}.{name}"
        inheritors = [x for x in project.inheritors(cls, name) if not project.shadowed(x, name)]
        inheritor_ids = {id(c) for c in inheritors}
        out: list[Proof] = []
        seen: set[tuple[str, int, int]] = set()

        def add(call: CallSite, module: ModuleInfo, certain: bool, *, through: bool = True) -> None:
            key = (module.file.display, call.line, call.col)
            if key in seen:
                return
            error = bind_method(shape_of(call), override, qualname, through_instance=through)
            if error is not None:
                seen.add(key)
                out.append(Proof(call, module, error, certain))

        for call, site_cls, module in calls:
            if call.receiver in (Receiver.SELF, Receiver.CLS) and site_cls is not None:
                # Runs on an instance (or, for `cls`, the class) of some inheritor X if X
                # inherits the calling method.
                on_class = call.receiver is Receiver.CLS
                if on_class and override.kind is MethodKind.INSTANCE:
                    continue  # `cls.m(obj, ...)` passes self explicitly: shape unknown
                for x in inheritors:
                    if project.definer(x, call.caller) is site_cls:  # so site_cls is in its MRO
                        add(call, module, True, through=not on_class)
                        break
            elif call.receiver is Receiver.SUPER and site_cls is not None:
                start = site_cls
                if call.receiver_class is not None:
                    start = project.resolve_class(module, call.receiver_class) or site_cls
                if project.definer(site_cls, name, after=start) is cls:
                    add(call, module, True)
            elif call.receiver is Receiver.CONSTRUCTED and call.receiver_class is not None:
                target = project.resolve_class(module, call.receiver_class)
                if target is not None and id(target) in inheritor_ids:
                    add(call, module, True)
            elif call.receiver is Receiver.ANNOTATED and call.receiver_class is not None:
                target = project.resolve_class(module, call.receiver_class)
                if target is None:
                    continue
                related = project.in_mro(cls, target) or project.in_mro(target, cls)
                if related and not project.shadowed(target, name):
                    add(call, module, False)
        out.sort(key=lambda p: (not p.certain, p.module.file.display, p.call.line))
        return out
