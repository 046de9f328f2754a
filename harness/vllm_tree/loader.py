"""Import a vLLM tree's modules from its files, never from site-packages.

:class:`TreeLoader` is a meta-path finder for every module under ``vllm`` (and ``flashinfer``):
a module its caller runs for real (``real(name)``) is compiled from the tree's own file, so
tracebacks and allocation sites name the tree's ``file:line``; a module the caller provides is
that module; anything else under ``vllm`` is an automatic stub (:mod:`harness.vllm_tree.stubbing`).
A package's ``__init__`` runs only when the package itself is real; ``vllm/__init__.py`` never
runs. A third-party package the tree's own code imports but this interpreter lacks is stubbed too
(and recorded): kernels are not run here. Inside ``with loader:`` (or between
:meth:`TreeLoader.install` and :meth:`TreeLoader.uninstall`) it owns those imports; on the way out
``sys.modules`` is put back as it was.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.cpython_compat import getframe
from harness.vllm_tree.stubbing import StubModule
from harness.vllm_tree.tree import read_source

OWN_ROOTS = ("vllm", "flashinfer")
"""Top-level packages whose every module comes from the loader (never from site-packages)."""


def _own(name: str) -> bool:
    return name.split(".", 1)[0] in OWN_ROOTS


class TreeLoader(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The finder and loader of one vLLM tree's modules (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        real: Callable[[str], bool],
        provided: Mapping[str, types.ModuleType],
        patches: Mapping[str, Mapping[str, object]] | None = None,
    ) -> None:
        self.root = Path(root)
        self.real = real
        """Whether a module runs from the tree's source (when the tree has its file)."""
        self.provided = dict(provided)
        for module in self.provided.values():  # ``from vllm import envs``: the module
            if isinstance(module, StubModule) and _own(module.__name__):
                module.__dict__["_submodule"] = self.is_module
        self.patches = {name: dict(attrs) for name, attrs in (patches or {}).items()}
        """Module -> attributes replaced right after the module's real code ran."""
        self.stubbed_third_party: set[str] = set()
        self._saved: dict[str, types.ModuleType] = {}
        self._installed = False

    # The tree's files ---------------------------------------------------------------------

    def source_path(self, name: str) -> Path | None:
        """The file of module ``name`` in the tree (``.py`` or a package's ``__init__.py``)."""
        base = self.root.joinpath(*name.split("."))
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py")
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
        return None

    # importlib protocol -------------------------------------------------------------------

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        del target
        if not _own(fullname):
            if not self._stubs_third_party(fullname, path):
                return None
            self.stubbed_third_party.add(fullname.split(".")[0])
            return importlib.util.spec_from_loader(fullname, self, is_package=True)
        source = self.source_path(fullname)
        if source is None and self.real(fullname) and fullname not in self.provided:
            return None  # the tree lacks a module that must run: a real ImportError
        package = source is None or source.name == "__init__.py"
        return importlib.util.spec_from_loader(fullname, self, is_package=package)

    def _stubs_third_party(self, fullname: str, path: Sequence[str] | None) -> bool:
        """A top-level package that the tree's own code imports and this interpreter lacks (or
        a submodule of one already stubbed)."""
        if fullname.split(".")[0] in self.stubbed_third_party:
            return True
        if "." in fullname or fullname in sys.stdlib_module_names:
            return False
        if importlib.machinery.PathFinder.find_spec(fullname, path) is not None:
            return False
        frame: types.FrameType | None = getframe(1)
        root = str(self.root) + "/"
        while frame is not None:
            filename = frame.f_code.co_filename
            if not filename.startswith("<frozen") and filename != __file__:
                return filename.startswith(root)  # the importer is the tree's own code
            frame = frame.f_back
        return False

    def is_module(self, fullname: str) -> bool:
        """Whether the loader serves ``fullname`` as a module (provided or a file in the tree)."""
        return fullname in self.provided or self.source_path(fullname) is not None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        provided = self.provided.get(spec.name)
        if provided is not None:
            return provided
        source = self.source_path(spec.name) if _own(spec.name) else None
        if source is not None and self.real(spec.name) and spec.name != "vllm":
            module = types.ModuleType(spec.name)
            if source.name == "__init__.py":
                module.__path__ = [str(source.parent)]
            return module
        if not _own(spec.name):
            return StubModule(spec.name)
        return StubModule(spec.name, submodule=self.is_module)

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        if isinstance(module, StubModule) or name in self.provided:
            return
        source = self.source_path(name)
        assert source is not None
        module.__file__ = str(source)
        code = compile(read_source(source), str(source), "exec")
        exec(code, module.__dict__)
        for attr, value in self.patches.get(name, {}).items():
            if attr in module.__dict__:
                module.__dict__[attr] = value

    # Life cycle -------------------------------------------------------------------------

    def __enter__(self) -> TreeLoader:
        return self.install()

    def __exit__(self, *exc_info: object) -> None:
        self.uninstall()

    def install(self) -> TreeLoader:
        """Take over ``vllm`` (and ``flashinfer``) imports in this process."""
        if self._installed:
            raise RuntimeError("TreeLoader is already installed")
        self._saved = {n: m for n, m in sys.modules.items() if _own(n)}
        for name in self._saved:
            del sys.modules[name]
        sys.meta_path.insert(0, self)
        self._installed = True
        return self

    def uninstall(self) -> None:
        """Remove every module this loader added and restore what was there before."""
        if not self._installed:
            return
        sys.meta_path.remove(self)
        for name in [n for n in sys.modules if _own(n) or n in self.stubbed_third_party]:
            del sys.modules[name]
        sys.modules.update(self._saved)
        importlib.invalidate_caches()
        self._installed = False

    def load(self, name: str) -> types.ModuleType:
        """Import ``name`` through this loader."""
        if not self._installed:
            raise RuntimeError("TreeLoader.load outside its with-block (before install)")
        return importlib.import_module(name)
