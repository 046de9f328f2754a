"""Hierarchy queries over the :class:`harness.overrides.model.mro.MroIndex`: which class of an MRO
binds a name (testing the few binding classes for ancestry), and who inherits a definition.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.overrides.model.mro import MroIndex
from harness.overrides.model.tree import ClassInfo

_FEW = 4
"""Up to this many candidate classes are tested for MRO membership instead of walking the MRO."""


class Hierarchy(MroIndex):
    """Subclasses, definers and inheritors of names, over one project's classes and their MROs."""

    def __init__(self, classes: list[ClassInfo]) -> None:
        super().__init__(classes)
        self._fully_resolved: dict[int, bool] = {}
        """A class -> whether every base in its MRO resolved (memo of :meth:`fully_resolved`)."""
        self.subclasses: dict[int, list[ClassInfo]] = {}
        """A class -> the classes that list it as a direct base."""
        self._binding_classes: dict[str, list[ClassInfo]] = {}
        """Name -> the classes whose body binds it (methods and other class attributes)."""
        self._assigning_classes: dict[str, list[ClassInfo]] = {}
        """Name -> the classes that assign ``self.name = ...``."""
        for cls in classes:
            for base in cls.bases:
                self.subclasses.setdefault(id(base), []).append(cls)
            for name in (*cls.summary.method_names, *cls.summary.attributes):
                self._binding_classes.setdefault(name, []).append(cls)
            for name in cls.summary.instance_attributes:
                self._assigning_classes.setdefault(name, []).append(cls)

    def _first(
        self,
        cls: ClassInfo,
        among: list[ClassInfo],
        after: ClassInfo | None,
        test: Callable[[ClassInfo], bool],
    ) -> ClassInfo | None:
        """The first class of ``among`` (the classes passing ``test``) in ``cls``'s MRO after
        ``after`` (from the start if ``None``): few are tested for membership, else the MRO is
        walked until one passes."""
        if len(among) <= _FEW and (after is None or after is cls):
            found = [c for c in among if c is not after and self.in_mro(c, cls)]
            if len(found) <= 1:
                return found[0] if found else None
        seeking = after is None
        for candidate in self.walk(cls):
            if seeking and test(candidate):
                return candidate
            seeking = seeking or candidate is after
        return None

    def definer(
        self, cls: ClassInfo, name: str, after: ClassInfo | None = None
    ) -> ClassInfo | None:
        """The first class in ``cls``'s MRO (after ``after``, if given) whose body binds ``name``."""
        binders = self._binding_classes.get(name)
        if binders is None:
            return None
        return self._first(cls, binders, after, lambda c: c.defines(name))

    def shadowed(self, cls: ClassInfo, name: str) -> bool:
        """True if some class in the MRO assigns ``self.name = ...``: the instance attribute,
        not the method, is what ``obj.name(...)`` calls."""
        assigners = self._assigning_classes.get(name)
        if assigners is None:
            return False
        test: Callable[[ClassInfo], bool] = lambda c: name in c.summary.instance_attributes  # noqa: E731
        return self._first(cls, assigners, None, test) is not None

    def inheritors(self, cls: ClassInfo, name: str) -> list[ClassInfo]:
        """``cls`` and its descendants whose ``name`` is ``cls``'s definition (a descendant binding
        ``name`` hides it from its own)."""
        return [
            cls,
            *self._below((cls,), lambda c: not c.defines(name) and self.definer(c, name) is cls),
        ]

    def descendants(self, *classes: ClassInfo) -> list[ClassInfo]:
        """All classes that have one of ``classes`` in their MRO, except those given."""
        return self._below(classes, lambda _: True)

    def _below(
        self, classes: tuple[ClassInfo, ...], keep: Callable[[ClassInfo], bool]
    ) -> list[ClassInfo]:
        """The subclasses of ``classes``, depth first, and theirs while ``keep`` holds for
        them (``classes`` themselves excluded)."""
        out: list[ClassInfo] = []
        seen = {id(c) for c in classes}
        stack = [child for cls in classes for child in self.subclasses.get(id(cls), ())]
        while stack:
            child = stack.pop()
            if id(child) in seen:
                continue
            seen.add(id(child))
            if keep(child):
                out.append(child)
                stack.extend(self.subclasses.get(id(child), ()))
        return out

    def read_definer(self, cls: ClassInfo, name: str) -> ClassInfo | None:
        """The class whose method ``name`` an instance of ``cls`` runs, when no base the
        checker did not read can come before it in ``cls``'s MRO (and might bind ``name``)."""
        definer = self.definer(cls, name)
        if definer is None or name not in definer.methods:
            return None
        for candidate in self.walk(cls):
            if candidate is definer:
                return definer
            if candidate.unresolved_bases:
                return None
        return None

    def fully_resolved(self, cls: ClassInfo) -> bool:
        """True when no class in the MRO has a base the checker could not resolve."""
        known = self._fully_resolved.get(id(cls))
        if known is None:
            known = not any(c.unresolved_bases for c in self.walk(cls))
            self._fully_resolved[id(cls)] = known
        return known
