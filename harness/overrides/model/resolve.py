"""The project: the scanned tree with its names bound, MROs computed, hierarchy indexed and
decorators applied, as the rules and the evidence ask about it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from harness.overrides.discover import SourceFile
from harness.overrides.model.decorators import apply_decorators
from harness.overrides.model.hierarchy import Hierarchy
from harness.overrides.model.names import NameBinding
from harness.overrides.model.tree import ClassInfo, ExternalModules, ModuleInfo
from harness.overrides.summary import FileSummary

__all__ = ["ClassInfo", "ExternalModules", "ModuleInfo", "Project"]


class Project(NameBinding, Hierarchy):
    """The whole scanned tree: modules, classes, bases, MROs (:attr:`problems`: the classes
    whose MRO could not be computed) and subclasses."""

    def __init__(
        self,
        modules: Iterable[tuple[SourceFile, FileSummary]],
        watch: Iterable[str] = (),
        external: ExternalModules | None = None,
        sources: Mapping[str, bytes] | None = None,
    ) -> None:
        NameBinding.__init__(self, modules, watch, external, sources)
        classes = self.all_classes()
        Hierarchy.__init__(self, classes)
        for cls in classes:
            apply_decorators(self, self, cls)
