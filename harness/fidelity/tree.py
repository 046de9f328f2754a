"""Where a vLLM source tree defines things, read from its text: nothing in it is imported or run.

vLLM moves code between releases (``vllm/utils.py`` became a package, ``BlockTable`` left
``vllm/v1/worker/block_table.py``, the MLA builder moved to ``vllm/model_executor``), so the
differentials find what they run by name and structure: :meth:`VllmTree.modules_defining` indexes
every top-level ``class``, ``def`` and assignment of the tree once; :meth:`VllmTree.find` reads
one module's syntax tree for a class, a method or a field.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from harness.fidelity.sandbox import module_path, parse_source
from harness.fidelity.source import VllmSource

_TOP_LEVEL = re.compile(r"^(?:class|def|async def)\s+(\w+)|^(\w+)\s*(?::[^=\n]*)?=(?!=)", re.M)
Definition = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.AnnAssign | ast.Assign


@dataclass(frozen=True)
class Location:
    """A line of a file of the tree, shown as ``vllm/v1/x.py:12`` (relative to the root)."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


class VllmTree:
    """The text of one vLLM source tree, indexed by top-level name."""

    def __init__(self, source: VllmSource) -> None:
        self.source = source
        self._syntax: dict[str, ast.Module | None] = {}

    @property
    def version(self) -> str:
        return self.source.version

    @cached_property
    def _index(self) -> dict[str, list[str]]:
        root = self.source.root
        index: dict[str, list[str]] = {}
        for path in sorted((root / "vllm").rglob("*.py")):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            for match in _TOP_LEVEL.finditer(text):
                index.setdefault(match.group(1) or match.group(2), []).append(module)
        return index

    def modules_defining(self, name: str, under: str = "vllm") -> list[str]:
        """The modules that define ``name`` at top level, under the package ``under``."""
        return [
            m
            for m in dict.fromkeys(self._index.get(name, []))
            if m == under or m.startswith(f"{under}.")
        ]

    def module_defining(
        self, name: str, under: tuple[str, ...] = ("vllm.v1", "vllm")
    ) -> str | None:
        """The module whose syntax defines ``name`` at top level, looked for under each package
        of ``under`` in turn (V1 before the V0 engine that 0.9.x still ships); the shortest
        module name when several do. None when no module does."""
        for package in under:
            found = [
                m for m in self.modules_defining(name, package) if self.find(m, name) is not None
            ]
            if found:
                return min(found, key=lambda m: (m.count("."), m))
        return None

    def path(self, module: str) -> Path:
        """The file of ``module`` (a package's ``__init__.py``)."""
        path = module_path(self.source.root, module)
        package = path.with_suffix("") / "__init__.py"
        return package if not path.is_file() and package.is_file() else path

    def syntax(self, module: str) -> ast.Module | None:
        """``module``'s syntax tree; None when the tree has no such file."""
        if module not in self._syntax:
            path = self.path(module)
            self._syntax[module] = parse_source(path) if path.is_file() else None
        return self._syntax[module]

    def find(self, module: str, qualname: str) -> Definition | None:
        """The definition of ``qualname`` (``Class``, ``Class.method``, ``Class.field``,
        ``function``) in ``module``; for a class member, also in the module's base classes that
        the module itself defines. None when it is not there."""
        tree = self.syntax(module)
        if tree is None:
            return None
        head, _, rest = qualname.partition(".")
        node = _named(tree.body, head)
        while rest and isinstance(node, ast.ClassDef):
            name, _, rest = rest.partition(".")
            member = _named(node.body, name)
            if member is None:
                bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
                member = next(
                    (m for b in bases if (m := self.find(module, f"{b}.{name}")) is not None),
                    None,
                )
            node = member
        return None if rest else node

    def location(self, module: str, qualname: str) -> Location | None:
        """Where ``qualname`` is defined in ``module`` (see :meth:`find`)."""
        node = self.find(module, qualname)
        return None if node is None else self.at(module, node.lineno)

    def at(self, module: str, line: int) -> Location:
        """Line ``line`` of ``module``'s file."""
        return Location(self.path(module).relative_to(self.source.root).as_posix(), line)

    def uses(self, module: str, qualname: str, name: str) -> Location | None:
        """The first line of ``qualname``'s definition in ``module`` that reads ``name`` (as a
        name, an attribute or a keyword), or None."""
        node = self.find(module, qualname)
        if node is None:
            return None
        lines = [
            child.lineno
            for child in ast.walk(node)
            if (isinstance(child, ast.Name) and child.id == name)
            or (isinstance(child, ast.Attribute) and child.attr == name)
            or (isinstance(child, ast.keyword) and child.arg == name)
        ]
        return self.at(module, min(lines)) if lines else None

    def parameters(self, module: str, qualname: str) -> list[str] | None:
        """The parameter names of a function or method (``self`` left out), or None."""
        node = self.find(module, qualname)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return None
        args = node.args
        names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
        return names[1:] if names[:1] == ["self"] else names


def _named(body: list[ast.stmt], name: str) -> Definition | None:
    """The last statement of ``body`` defining ``name`` (as Python binds it)."""
    found: Definition | None = None
    for node in body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            if node.name == name:
                found = node
        elif isinstance(node, ast.AnnAssign):
            if isinstance(node.target, ast.Name) and node.target.id == name:
                found = node
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            found = node
    return found
