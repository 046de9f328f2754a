"""Whether a recorded guard atom (``isinstance(self, C)``, ``type(self).m is C.m``) holds
for instances of a class."""

from __future__ import annotations

from harness.overrides.facts.records import GUARD_IDENTITY, GUARD_ISINSTANCE, Atom
from harness.overrides.model.resolve import ClassInfo, ModuleInfo, Project


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
