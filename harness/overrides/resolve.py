"""The project: the scanned tree with its names bound, its MROs computed and its hierarchy
indexed, as the rules and the evidence ask about it.

:class:`Project` is the name binding (:mod:`harness.overrides.names`: what each name of each
module is, classes' bases) with the queries of the MRO and ancestry index
(:mod:`harness.overrides.mro`) and of the hierarchy (:mod:`harness.overrides.hierarchy`:
definers, inheritors, descendants); methods are then taken as the project's own decorators
leave them (:mod:`harness.overrides.decorators`). The records it hands out are in
:mod:`harness.overrides.tree`; the graph has no reference cycle, so a project is freed by
reference counting as soon as the check drops it.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.overrides.decorators import apply_decorators
from harness.overrides.discover import SourceFile
from harness.overrides.hierarchy import Hierarchy
from harness.overrides.mro import MroIndex
from harness.overrides.names import NameBinding
from harness.overrides.summary import FileSummary
from harness.overrides.tree import ClassInfo, ExternalModules, ModuleInfo

__all__ = ["ClassInfo", "ExternalModules", "ModuleInfo", "Project"]


class Project(NameBinding):
    """The whole scanned tree: modules, classes, bases, MROs and subclasses.

    The queries of the MRO index and the hierarchy are bound once (no call through a wrapper).
    """

    def __init__(
        self,
        modules: Iterable[tuple[SourceFile, FileSummary]],
        watch: Iterable[str] = (),
        external: ExternalModules | None = None,
    ) -> None:
        super().__init__(modules, watch, external)
        classes = self.all_classes()
        ancestry = MroIndex(classes)
        hierarchy = Hierarchy(classes, ancestry)
        for cls in classes:
            apply_decorators(self, ancestry, cls)
        self.problems = ancestry.problems
        """Classes whose MRO could not be computed."""
        self.mro = ancestry.mro
        self.in_mro = ancestry.in_mro
        self.definer = hierarchy.definer
        self.shadowed = hierarchy.shadowed
        self.inheritors = hierarchy.inheritors
        self.descendants = hierarchy.descendants
        self.fully_resolved = hierarchy.fully_resolved
