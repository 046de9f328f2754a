"""Load vLLM modules from their source text, with stubs for every other vLLM import.

Inside ``with VllmSandbox(source, real=..., stubs=...) as sandbox``, a module named in ``real`` is
compiled from its file under the source tree, one named in ``stubs`` is that stub, and any other
module under the stubbed roots (``vllm``, ``flashinfer`` ...) is an automatic stub whose classes
refuse to be used as a truth value (:class:`StubValueError`). Packages are never executed, and on
exit every module the sandbox added is removed, so the installed ``vllm`` is never imported.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.errors import HarnessError

STUBBED_ROOTS = ("vllm", "flashinfer")
"""Top-level packages whose every module comes from the sandbox."""


class StubValueError(RuntimeError):
    """vLLM code used a stub (something the sandbox does not provide) as a value."""


class _StubMeta(type):
    """Metaclass of stub classes: any attribute is another stub; truth values are refused."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        cache: dict[str, Any] = cls.__dict__["_stub_attributes"]
        if name not in cache:
            cache[name] = make_stub_class(f"{cls.__qualname__}.{name}")
        return cache[name]

    def __getitem__(cls, item: object) -> Any:
        return cls  # Generic-style subscripts in annotations and base classes

    def __bool__(cls) -> bool:
        raise StubValueError(f"vLLM code read {cls.__qualname__}, which the sandbox stubs out")


class _Stub(metaclass=_StubMeta):
    """Instances accept any construction, any attribute and any call; truth values are refused."""

    _stub_attributes: dict[str, Any] = {}  # noqa: RUF012 (each stub class gets its own)

    def __init__(self, *args: object, **kwargs: object) -> None:
        del args, kwargs

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._stub_attributes = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(type(self), name)()

    def __call__(self, *args: object, **kwargs: object) -> Any:
        return type(self)()

    def __bool__(self) -> bool:
        raise StubValueError(f"vLLM code read an instance of {type(self).__qualname__} (stub)")


def make_stub_class(qualname: str) -> type[Any]:
    """A fresh stub class called ``qualname``."""
    name = qualname.rsplit(".", 1)[-1]
    stub = _StubMeta(name, (_Stub,), {"_stub_attributes": {}, "__module__": "vllm-stub"})
    stub.__qualname__ = qualname
    return stub


class StubModule(types.ModuleType):
    """A module whose missing attributes are stub classes; ``attrs`` gives the real ones.

    An attribute named like a submodule loaded for real or given an explicit stub
    (``real_children``) is that submodule, so ``from vllm.v1.worker import block_table`` imports
    the real file and ``from vllm import envs`` the explicit stub.
    """

    def __init__(
        self,
        name: str,
        attrs: Mapping[str, object] | None = None,
        real_children: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(name)
        self.__dict__["__path__"] = []  # a package: submodules can be imported under it
        self.__dict__["_real_children"] = real_children
        self.__dict__.update(attrs or {})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        if f"{self.__name__}.{name}" in self.__dict__["_real_children"]:
            return importlib.import_module(f"{self.__name__}.{name}")
        stub = make_stub_class(f"{self.__name__}.{name}")
        setattr(self, name, stub)
        return stub


def _under_roots(name: str) -> bool:
    return name.split(".", 1)[0] in STUBBED_ROOTS


def module_path(root: Path, name: str) -> Path:
    """The source file of module ``name`` under the source tree ``root``."""
    return root.joinpath(*name.split(".")).with_suffix(".py")


class _Importer(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads every module under the stubbed roots, for one sandbox."""

    def __init__(self, sandbox: VllmSandbox) -> None:
        self.sandbox = sandbox

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        del path, target
        if not _under_roots(fullname):
            return None
        real = fullname in self.sandbox.real and fullname not in self.sandbox.stubs
        return importlib.util.spec_from_loader(fullname, self, is_package=not real)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        stub = self.sandbox.stubs.get(spec.name)
        if stub is not None:
            return stub
        if spec.name in self.sandbox.real:
            return types.ModuleType(spec.name)
        return StubModule(
            spec.name, real_children=self.sandbox.real | frozenset(self.sandbox.stubs)
        )

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        if name not in self.sandbox.real or name in self.sandbox.stubs:
            return
        path = module_path(self.sandbox.root, name)
        module.__file__ = str(path)
        code = compile(path.read_text(encoding="utf-8"), str(path), "exec")
        exec(code, module.__dict__)


class VllmSandbox:
    """A scope in which ``import vllm...`` resolves to source-loaded modules and stubs."""

    def __init__(
        self,
        root: Path,
        real: Iterable[str],
        stubs: Mapping[str, types.ModuleType] | None = None,
    ) -> None:
        self.root = Path(root)
        self.real = frozenset(real)
        self.stubs = dict(stubs or {})
        missing = [n for n in sorted(self.real) if not module_path(self.root, n).is_file()]
        if missing:
            raise HarnessError(
                f"{self.root} is not a vLLM source tree: missing "
                + ", ".join(str(module_path(self.root, n)) for n in missing)
            )
        self._finder = _Importer(self)
        self._saved: dict[str, types.ModuleType] = {}
        self._active = False

    def __enter__(self) -> VllmSandbox:
        if self._active:
            raise RuntimeError("VllmSandbox is not re-entrant")
        self._saved = {n: m for n, m in sys.modules.items() if _under_roots(n)}
        for name in self._saved:
            del sys.modules[name]
        sys.meta_path.insert(0, self._finder)
        self._active = True
        return self

    def __exit__(self, *exc_info: object) -> None:
        sys.meta_path.remove(self._finder)
        for name in [n for n in sys.modules if _under_roots(n)]:
            del sys.modules[name]
        sys.modules.update(self._saved)
        importlib.invalidate_caches()
        self._active = False

    def load(self, name: str) -> types.ModuleType:
        """Import ``name`` inside the sandbox (real source if listed in ``real``)."""
        if not self._active:
            raise RuntimeError("VllmSandbox.load outside its with-block")
        return importlib.import_module(name)


def parse_source(path: Path) -> ast.Module:
    """The syntax tree of ``path``; an unreadable or unparsable file is a clear error."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        raise HarnessError(f"cannot read {path}: {exc.strerror}") from None
    except SyntaxError as exc:
        raise HarnessError(f"cannot parse {path}: {exc.msg} (line {exc.lineno})") from None


def extract_definitions(
    path: Path, names: Iterable[str], namespace: dict[str, Any]
) -> dict[str, Any]:
    """Execute only the top-level functions, classes and assignments called ``names`` from
    ``path``.

    For helpers that live in modules too heavy to load whole (``vllm/utils.py``): vLLM's own code,
    with annotations and function decorators dropped (they may name things the namespace lacks).
    Returns ``namespace``.
    """
    wanted = set(names)
    tree = parse_source(path)
    kept: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in wanted:
            functions = [node] if isinstance(node, ast.FunctionDef) else node.body
            for function in functions:
                if isinstance(function, ast.FunctionDef):
                    _drop_annotations(function)
            kept.append(node)
            wanted.discard(node.name)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in wanted for t in node.targets
        ):
            kept.append(node)
            wanted -= {t.id for t in node.targets if isinstance(t, ast.Name)}
    if wanted:
        raise HarnessError(f"{path} defines none of: {', '.join(sorted(wanted))}")
    exec(compile(ast.Module(body=kept, type_ignores=[]), str(path), "exec"), namespace)
    return namespace


_BUILTIN_DECORATORS = frozenset({"staticmethod", "classmethod", "property"})


def _drop_annotations(function: ast.FunctionDef) -> None:
    """Drop ``function``'s annotations and decorators, but the built-in ones of a method."""
    function.decorator_list = [
        d
        for d in function.decorator_list
        if isinstance(d, ast.Name) and d.id in _BUILTIN_DECORATORS
    ]
    function.returns = None
    args = function.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
        if arg is not None:
            arg.annotation = None


def exec_attribute_assignments(
    path: Path, class_name: str, method: str, attributes: Iterable[str], instance: object
) -> None:
    """Run the top-level ``self.<attr> = ...`` statements of ``class_name.method`` on ``instance``.

    For buffers vLLM creates in a constructor too heavy to run whole (``GPUModelRunner.__init__``):
    vLLM's own statements, in vLLM's order, with ``self`` bound to ``instance`` (which must already
    hold what they read, e.g. ``max_num_tokens``, ``device``, ``pin_memory``).
    """
    wanted = set(attributes)
    tree = parse_source(path)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    functions = [
        n for c in classes for n in c.body if isinstance(n, ast.FunctionDef) and n.name == method
    ]
    if not functions:
        raise HarnessError(f"{path} has no {class_name}.{method}")
    kept: list[ast.stmt] = []
    for node in functions[0].body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        names = {
            t.attr
            for t in targets
            if isinstance(t, ast.Attribute)
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
        }
        if names & wanted:
            kept.append(node)
            wanted -= names
    if wanted:
        raise HarnessError(
            f"{path} {class_name}.{method} assigns none of: {', '.join(sorted(wanted))}"
        )
    code = compile(ast.Module(body=kept, type_ignores=[]), str(path), "exec")
    exec(code, {"torch": torch, "np": np, "self": instance})
