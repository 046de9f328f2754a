"""Where the tree may read or change an attribute, asked of each file's summary
(:class:`~harness.overrides.summary.AttributeNames`): only the files naming ``.x`` are read."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator

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
    # The dot first, then the look back: a literal start lets the search skip ahead.
    return re.search(rf"\.(?<!\bself\.)(?<!\bcls\.)[ \t]*{re.escape(attr)}\b", text) is not None


class Stores:
    """Whether some file of the tree stores ``<obj>.<attr>``: assigns or deletes it, or names it in
    ``setattr``/``delattr``; a file that does not parse counts as storing it."""

    def __init__(self, project: Project, tree_of: Callable[[str], ast.Module | None]) -> None:
        self.project = project
        self.tree_of = tree_of
        self._known: dict[tuple[str, bool], bool] = {}

    def stored(self, attr: str, others: bool = False) -> bool:
        """Whether a file stores ``<obj>.<attr>`` (with ``others``: ``obj`` not a bare
        ``self``/``cls``, bar ``setattr``/``delattr``)."""
        key = (attr, others)
        if key not in self._known:
            self._known[key] = any(
                self._stores(module, attr, others)
                for module in modules_naming(self.project, attr, by_name=True)
            )
        return self._known[key]

    def _stores(self, module: ModuleInfo, attr: str, others: bool) -> bool:
        if others and attr not in module.summary.names.by_name:
            text = self.project.text(module.file.path)
            if text is not None and not named_on_other_objects(text, attr):
                return False
        tree = self.tree_of(module.file.path)
        if tree is None or not tree.body:
            return True
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == attr:
                owner = node.value
                mine = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
                if not isinstance(node.ctx, ast.Load) and not (others and mine):
                    return True
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("setattr", "delattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value == attr
            ):
                return True
        return False
