"""Import a vLLM tree's attention code from its files, never from site-packages.

:class:`TreeLoader` is a meta-path finder for every module under ``vllm``: a module on the
attention path (:data:`REAL_PREFIXES`) is compiled from the tree's own file, so tracebacks and
allocation sites name the tree's ``file:line``; a module the adapter provides
(``harness.adapter.stubs``) is that module; anything else under ``vllm`` (the engine, the model
executor, distributed state, custom ops) is an automatic stub (:mod:`harness.adapter.stubbing`).
Package ``__init__`` files run for real only under :data:`REAL_PREFIXES`; ``vllm/__init__.py``
never runs. A third-party package the tree imports but this interpreter lacks is stubbed too
(and recorded): the adapter does not run kernels. ``flashinfer`` is always the adapter's own.

Installed once per process (the tree's code runs in a child process, :mod:`harness.adapter.child`);
:meth:`TreeLoader.uninstall` puts ``sys.modules`` back for in-process use in tests.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.adapter.stubbing import StubModule
from harness.cpython_compat import getframe

REAL_PREFIXES = (
    "vllm.envs",
    "vllm.utils",
    "vllm.platforms.interface",
    "vllm.attention",
    "vllm.v1.attention",
    "vllm.v1.kv_cache_interface",
    "vllm.v1.kv_cache_layout",
    "vllm.v1.kv_cache_spec_registry",
    "vllm.v1.utils",
    "vllm.v1.worker.block_table",
    "vllm.v1.worker.cp_utils",
    "vllm.v1.worker.workspace",
    "vllm.v1.worker.ubatching",
    "vllm.model_executor.layers.attention",
    "vllm.model_executor.layers.attention_layer_base",
    "vllm.model_executor.layers.quantization.utils.quant_utils",
    "vllm.scalar_type",
    "vllm.config.cache",
)
"""Modules (and packages, with everything under them) executed from the tree's source."""

OWN_ROOTS = ("vllm", "flashinfer")
"""Top-level packages whose every module comes from the loader (never from site-packages)."""


def is_real(name: str) -> bool:
    """Whether module ``name`` runs from the tree's source (see :data:`REAL_PREFIXES`)."""
    return any(name == p or name.startswith(p + ".") for p in REAL_PREFIXES)


def _own(name: str) -> bool:
    return name.split(".", 1)[0] in OWN_ROOTS


class TreeLoader(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The finder and loader of one vLLM tree's modules (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        provided: Mapping[str, types.ModuleType],
        patches: Mapping[str, Mapping[str, object]] | None = None,
    ) -> None:
        self.root = Path(root)
        self.provided = dict(provided)
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
        if source is None and is_real(fullname) and fullname not in self.provided:
            return None  # the tree lacks a module of the attention path: a real ImportError
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
        if source is not None and is_real(spec.name) and spec.name != "vllm":
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
        code = compile(source.read_text(encoding="utf-8"), str(source), "exec")
        exec(code, module.__dict__)
        for attr, value in self.patches.get(name, {}).items():
            if attr in module.__dict__:
                module.__dict__[attr] = value

    # Life cycle -------------------------------------------------------------------------

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
            raise RuntimeError("TreeLoader.load before install")
        return importlib.import_module(name)
