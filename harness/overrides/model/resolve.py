"""The project: the scanned tree with its names bound, MROs computed, hierarchy indexed and
decorators applied, as the rules and the evidence ask about it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from harness.overrides.discover import SourceFile
from harness.overrides.model.decorators import apply_decorators
from harness.overrides.model.hierarchy import Hierarchy
from harness.overrides.model.mro import MroIndex
from harness.overrides.model.names import NameBinding
from harness.overrides.model.tree import ClassInfo, ExternalModules, ModuleInfo
from harness.overrides.summary import FileSummary

__all__ = ["ClassInfo", "ExternalModules", "ModuleInfo", "Project"]


class Project(NameBinding):
    """The whole scanned tree: modules, classes, bases, MROs and subclasses."""

    def __init__(
        self,
        modules: Iterable[tuple[SourceFile, FileSummary]],
        watch: Iterable[str] = (),
        external: ExternalModules | None = None,
        sources: Mapping[str, bytes] | None = None,
    ) -> None:
        super().__init__(modules, watch, external, sources)
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
        self.read_definer = hierarchy.read_definer
        self.shadowed = hierarchy.shadowed
        self.inheritors = hierarchy.inheritors
        self.descendants = hierarchy.descendants
        self.fully_resolved = hierarchy.fully_resolved
