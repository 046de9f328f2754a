"""Where the tree may read or change an attribute: a query over the
:class:`~harness.overrides.summary.AttributeNames` every file's summary holds (made in the
summary pass and cached with it), so a decider asking "is ``.x`` written anywhere" reads
only the few files that name ``x``, never every file's text again."""

from __future__ import annotations

from collections.abc import Iterator

from harness.overrides.model.resolve import ModuleInfo, Project


def modules_naming(
    project: Project, attr: str, *, foreign: bool = False, by_name: bool = False
) -> Iterator[ModuleInfo]:
    """The modules (the tree's, then those read from outside it) whose text writes ``.attr``
    (``foreign``: after something else than a bare ``self``/``cls``), or, with ``by_name``,
    names it in a ``setattr``/``delattr`` call."""
    for module in project.all_files():
        names = module.summary.names
        if attr in (names.foreign if foreign else names.dotted) or (
            by_name and attr in names.by_name
        ):
            yield module
