"""vLLM's compared modules, loaded from a source tree inside a sandbox, for the differentials."""

from __future__ import annotations

import types
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from harness.errors import HarnessError
from harness.fidelity.era import Era, builder_era
from harness.fidelity.sandbox import VllmSandbox, extract_definitions
from harness.fidelity.source import VllmSource
from harness.fidelity.stubs import PlanRecorder, make_stubs
from harness.fidelity.tree import VllmTree


@dataclass
class VllmCode:
    """The loaded vLLM modules of one source tree, its era and the FlashInfer plan recorder."""

    tree: VllmTree
    era: Era | None
    """The builders' API era (None: the tree has no attention builders)."""
    sandbox: VllmSandbox
    recorder: PlanRecorder
    helpers: dict[str, Any] = field(default_factory=dict[str, Any])

    @property
    def source(self) -> VllmSource:
        return self.tree.source

    def module(self, name: str) -> types.ModuleType:
        """vLLM's module ``vllm.<name>``, e.g. ``module("v1.kv_cache_interface")``.

        Only modules loaded from source or given an explicit stub: a differential that asks for
        anything else would be comparing against an automatic stub, so that is an error.
        """
        full = name if name.startswith("vllm.") else f"vllm.{name}"
        if full not in self.sandbox.real and full not in self.sandbox.stubs:
            raise RuntimeError(f"{full} is neither loaded from source nor an explicit stub")
        return self.sandbox.load(full)

    def module_defining(self, name: str) -> types.ModuleType:
        """The loaded module of the tree that defines the class or function ``name``."""
        module = self.tree.module_defining(name)
        if module is None:
            raise RuntimeError(f"vLLM {self.tree.version} defines no {name}")
        return self.module(module)

    def defining(self, name: str) -> Any:
        """The class or function ``name`` from the loaded module of the tree that defines it."""
        return getattr(self.module_defining(name), name)

    def helper(self, name: str, beside: str | None = None) -> Any:
        """vLLM's top-level function ``name``, cut out of the module that defines it (or that
        defines ``beside`` too, where several modules define a ``name``): for a module too heavy
        to load whole, e.g. the model runner. Annotations are dropped."""
        if name not in self.helpers:
            module = self.tree.module_defining(beside or name)
            if module is None or self.tree.find(module, name) is None:
                raise RuntimeError(f"vLLM {self.tree.version} defines no {name} beside {beside}")
            self.helpers[name] = extract_definitions(self.tree.path(module), [name], {})[name]
        return self.helpers[name]


@contextmanager
def open_vllm(
    source: VllmSource, modules: Sequence[str], tree: VllmTree | None = None
) -> Generator[VllmCode, None, None]:
    """Load vLLM's ``modules`` from ``source`` for the duration of the ``with`` block."""
    tree = tree or VllmTree(source)
    recorder = PlanRecorder()
    with VllmSandbox(source.root, modules, make_stubs(tree, recorder)) as sandbox:
        code = VllmCode(tree, builder_era(tree), sandbox, recorder)
        for name in modules:  # load everything now: a broken tree fails before any trial
            try:
                sandbox.load(name)
            except Exception as exc:
                raise HarnessError(
                    f"cannot load {name} from {source.root} (vLLM {source.version}): "
                    f"{type(exc).__name__}: {exc}; the stubs of harness/fidelity/stubs.py do not "
                    "provide what it needs"
                ) from exc
        yield code
