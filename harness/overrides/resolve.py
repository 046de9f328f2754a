"""The project: the scanned tree with its names bound, its MROs computed and its hierarchy
indexed, as the rules and the evidence ask about it.

:class:`Project` puts together three parts, each its own module: name binding
(:mod:`harness.overrides.names`: what each name of each module is, classes' bases), the MRO
and ancestry index (:mod:`harness.overrides.mro`), and hierarchy queries
(:mod:`harness.overrides.hierarchy`: definers, inheritors, descendants); methods are then
taken as the project's own decorators leave them (:mod:`harness.overrides.decorators`). The
records it hands out (:class:`ClassInfo`, :class:`ModuleInfo`) are in
:mod:`harness.overrides.tree`; the graph has no reference cycle, so a project is freed by
reference counting as soon as the check drops it.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.overrides.decorators import apply_decorators, descriptor_kind
from harness.overrides.discover import SourceFile
from harness.overrides.hierarchy import Hierarchy
from harness.overrides.mro import MroIndex
from harness.overrides.names import NameBinding
from harness.overrides.summary import FileSummary
from harness.overrides.tree import (
    Binding,
    ClassInfo,
    ExternalModules,
    FunctionInfo,
    InheritanceCycle,
    MisrootedBase,
    ModuleInfo,
    MroProblem,
    NoLinearization,
    Target,
)

__all__ = [
    "Binding",
    "ClassInfo",
    "ExternalModules",
    "FunctionInfo",
    "InheritanceCycle",
    "MisrootedBase",
    "ModuleInfo",
    "MroProblem",
    "NoLinearization",
    "Project",
    "Target",
]


class Project:
    """The whole scanned tree: modules, classes, bases, MROs and subclasses.

    Its queries are those of its three parts, bound once (no call through a wrapper).
    """

    def __init__(
        self,
        modules: Iterable[tuple[SourceFile, FileSummary]],
        watch: Iterable[str] = (),
        external: ExternalModules | None = None,
    ) -> None:
        names = NameBinding(modules, watch, external)
        classes = names.all_classes()
        ancestry = MroIndex(classes)
        hierarchy = Hierarchy(classes, ancestry)
        for cls in classes:
            apply_decorators(names, ancestry, cls)
        self.names = names
        self.ancestry = ancestry
        self.hierarchy = hierarchy
        self.modules = names.modules
        """Modules by every name they may be imported as (the first file of a name wins)."""
        self.files = names.files
        """One module per file of the tree, in the order given."""
        self.external_files = names.external_files
        """Modules read from outside the tree to resolve bases, in the order loaded."""
        self.classes = names.classes
        """Classes of the scanned tree (external ones are in :attr:`external_classes`)."""
        self.external_classes = names.external_classes
        self.affected = names.affected
        """Classes whose bases are resolved through a watched module name (``watch``: the
        module names of deleted files), found or not."""
        self.problems = ancestry.problems
        """Classes whose MRO could not be computed."""
        self.all_classes = names.all_classes
        self.all_files = names.all_files
        self.absolute_module = names.absolute_module
        self.resolve = names.resolve
        self.resolve_class = names.resolve_class
        self.misrooted = names.misrooted
        self.mro = ancestry.mro
        self.in_mro = ancestry.in_mro
        self.definer = hierarchy.definer
        self.shadowed = hierarchy.shadowed
        self.inheritors = hierarchy.inheritors
        self.descendants = hierarchy.descendants
        self.fully_resolved = hierarchy.fully_resolved

    def descriptor_kind(self, cls: ClassInfo) -> int:
        """How instances of ``cls`` behave as class attributes (``DESCRIPTOR_*``)."""
        return descriptor_kind(self.ancestry, cls)
