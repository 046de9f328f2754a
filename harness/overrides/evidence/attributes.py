"""Where the tree may read or change an attribute: a query over the
:class:`~harness.overrides.summary.AttributeNames` of every file's summary, so "is ``.x`` written
anywhere" reads only the files that name ``x``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from harness.overrides.model.resolve import ModuleInfo, Project


def modules_naming(project: Project, attr: str, *, by_name: bool = False) -> Iterator[ModuleInfo]:
    """The modules (the tree's, then those read from outside it) whose text writes ``.attr``,
    or, with ``by_name``, names it in a ``setattr``/``delattr`` call."""
    for module in project.all_files():
        names = module.summary.names
        if attr in names.dotted or (by_name and attr in names.by_name):
            yield module


def named_on_other_objects(text: str, attr: str) -> bool:
    """Whether ``text`` writes ``.attr`` after something else than a bare ``self``/``cls``."""
    return re.search(rf"(?<!\bself)(?<!\bcls)\.[ \t]*{re.escape(attr)}\b", text) is not None
