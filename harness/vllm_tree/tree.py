"""A vLLM source tree given by the user, and where it defines things, read from its text.

:func:`locate_tree` accepts the directory that holds the ``vllm`` package (or ``vllm/``
itself): a git checkout, or the ``.py`` files of a wheel. vLLM moves code between releases
(``vllm/utils.py`` became a package, the MLA builder moved to ``vllm/model_executor``), so code
is found by name and structure: :meth:`VllmTree.modules_defining` indexes every top-level
``class``, ``def`` and assignment of the tree once; :meth:`VllmTree.find` reads one module's
syntax tree for a class, a method or a field. Nothing in the tree is written, imported or run.
"""

from __future__ import annotations

import ast
import re
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from harness.errors import HarnessError
from harness.overrides.report import one_line

_VERSION_RE = re.compile(r"""^__version__\s*(?::\s*str\s*)?=.*?['"]([^'"]+)['"]""", re.MULTILINE)
_TOP_LEVEL = re.compile(r"^(?:class|def|async def)\s+(\w+)|^(\w+)\s*(?::[^=\n]*)?=(?!=)", re.M)
MARKER_FILE = "vllm/v1/kv_cache_interface.py"
"""The file every supported tree has (the V1 KV cache specs the builders take)."""
Definition = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.AnnAssign | ast.Assign


@dataclass(frozen=True)
class Location:
    """A line of a file of the tree, shown as ``vllm/v1/x.py:12`` (relative to the root)."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class VllmTree:
    """A vLLM tree: ``root`` holds the ``vllm`` package (see the module docstring)."""

    root: Path
    version: str | None
    """The release in ``vllm/_version.py`` when the tree has one (a wheel does; a checkout
    that was never built does not). Only a label: the API era is read from signatures."""
    _syntax: dict[str, ast.Module | None] = field(
        default_factory=dict[str, ast.Module | None], compare=False, repr=False
    )

    @property
    def label(self) -> str:
        """The root and its version, on one line whatever the path holds (a directory name with
        a newline and ``::error`` would otherwise forge a CI annotation)."""
        root = one_line(str(self.root))
        return f"{root} (vLLM {one_line(self.version)})" if self.version else root

    def file(self, relative: str) -> Path:
        """The path of ``relative`` (``vllm/...``) in the tree."""
        return self.root / relative

    def module_file(self, module: str) -> Path:
        """The file of ``module`` (a package's ``__init__.py``)."""
        path = self.root.joinpath(*module.split(".")).with_suffix(".py")
        package = path.with_suffix("") / "__init__.py"
        return package if not path.is_file() and package.is_file() else path

    def relative(self, path: str) -> str:
        """``path`` relative to the root when it lies in the tree (for messages), also where
        ``vllm/`` is a symbolic link to a directory elsewhere."""
        for candidate in (Path(path), Path(path).resolve()):
            try:
                return str(candidate.relative_to(self.root))
            except ValueError:
                continue
        return path

    def config_files(self) -> list[Path]:
        """The config module (``vllm/config.py``, 0.9) or the config package's modules."""
        single = self.root / "vllm" / "config.py"
        if single.is_file():
            return [single]
        return sorted((self.root / "vllm" / "config").glob("*.py"))

    # Where the tree defines things ------------------------------------------------------------

    @cached_property
    def _index(self) -> dict[str, list[str]]:
        index: dict[str, list[str]] = {}
        for path in sorted((self.root / "vllm").rglob("*.py")):
            try:
                text = read_source(path).decode("utf-8", errors="replace")
            except HarnessError:
                continue  # not a module Python could import either
            parts = path.relative_to(self.root).with_suffix("").parts
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

    def syntax(self, module: str) -> ast.Module | None:
        """``module``'s syntax tree; None when the tree has no such file."""
        if module not in self._syntax:
            path = self.module_file(module)
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
        return Location(self.module_file(module).relative_to(self.root).as_posix(), line)

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


def read_source(path: Path) -> bytes:
    """The bytes of the source file ``path``: a regular file (a FIFO or a device would never
    end); anything else, or a file that cannot be read, is a one-line error."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise HarnessError(f"cannot read {path}: not a regular file")
        return path.read_bytes()
    except OSError as exc:
        raise HarnessError(f"cannot read {path}: {exc.strerror or exc}") from None


def parse_source(path: Path) -> ast.Module:
    """The syntax tree of ``path``, decoded as Python decodes a module (UTF-8 unless a coding
    cookie says otherwise); an unreadable or unparsable file is a one-line error."""
    source = read_source(path)
    try:
        return ast.parse(source, str(path))
    except SyntaxError as exc:
        line = f" (line {exc.lineno})" if exc.lineno else ""
        raise HarnessError(f"cannot parse {path}: {exc.msg}{line}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, nesting too deep
        raise HarnessError(f"cannot parse {path}: {type(exc).__name__}: {exc}") from None


def read_version(root: Path) -> str | None:
    """The release in ``root/vllm/_version.py`` (read as text, never executed), or ``None``."""
    try:
        text = read_source(root / "vllm" / "_version.py").decode("utf-8", errors="replace")
    except HarnessError:
        return None
    match = _VERSION_RE.search(text)
    return match.group(1) if match else None


def locate_tree(path: Path | str, flag: str = "--vllm-src") -> VllmTree:
    """The vLLM tree at ``path`` (the directory holding ``vllm/``, or ``vllm/`` itself)."""
    given = Path(path).expanduser()
    shown = one_line(str(given))
    if not given.is_dir():
        if given.exists():
            what = "not a directory"
        elif given.is_symlink():
            what = "a symbolic link that leads nowhere (a loop, or a target that is gone)"
        else:
            what = "no such directory"
        raise HarnessError(f"{flag} {shown}: {what}")
    for root in (given, given.parent):
        if (root / "vllm").is_dir() and (root / MARKER_FILE).is_file():
            return VllmTree(root.resolve(), read_version(root))
    if (given / "vllm").is_dir() or given.name == "vllm":
        raise HarnessError(
            f"{flag} {shown}: a vllm package without the V1 engine (no {MARKER_FILE}), outside "
            "the supported eras (vLLM 0.9 and later)"
        )
    raise HarnessError(
        f"{flag} {shown}: not a vLLM tree (no vllm/ directory here); give the directory that "
        "holds the vllm package (a git checkout of vLLM, or the unpacked .py files of a wheel)"
    )
