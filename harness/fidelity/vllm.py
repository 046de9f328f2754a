"""vLLM's compared modules, loaded from a source tree, for the differentials.

The compared modules run from the tree's files (:class:`~harness.vllm_tree.loader.TreeLoader`),
every other ``vllm.*`` and ``flashinfer`` import is a module of :mod:`harness.fidelity.stubs` or
an automatic stub. Once they are loaded, a stub that vLLM code uses raises, naming it
(:mod:`harness.vllm_tree.stubbing`): a differential never compares against a stub's answer.
"""

from __future__ import annotations

import types
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from harness.errors import HarnessError
from harness.fidelity.stubs import make_stubs
from harness.vllm_tree.era import Era, tree_era
from harness.vllm_tree.extract import extract_definitions
from harness.vllm_tree.loader import TreeLoader
from harness.vllm_tree.provided import PlanRecorder
from harness.vllm_tree.stubbing import LEDGER
from harness.vllm_tree.tree import VllmTree


@dataclass
class VllmCode:
    """The loaded vLLM modules of one source tree, its era and the FlashInfer plan recorder."""

    tree: VllmTree
    era: Era | None
    """The builders' API era (None: the tree has no attention builders)."""
    loader: TreeLoader
    real: frozenset[str]
    """The modules run from the tree's files."""
    recorder: PlanRecorder
    helpers: dict[str, Any] = field(default_factory=dict[str, Any])

    def module(self, name: str) -> types.ModuleType:
        """vLLM's module ``vllm.<name>``, e.g. ``module("v1.kv_cache_interface")``.

        Only modules loaded from source or provided: a differential that asks for anything else
        would be comparing against an automatic stub, so that is an error.
        """
        full = name if name.startswith("vllm.") else f"vllm.{name}"
        if full not in self.real and full not in self.loader.provided:
            raise RuntimeError(f"{full} is neither loaded from source nor provided")
        return self.loader.load(full)

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
        to load whole, e.g. the model runner."""
        if name not in self.helpers:
            module = self.tree.module_defining(beside or name)
            if module is None or self.tree.find(module, name) is None:
                raise RuntimeError(f"vLLM {self.tree.version} defines no {name} beside {beside}")
            namespace: dict[str, Any] = {}
            extract_definitions(self.tree.module_file(module), [name], namespace)
            self.helpers[name] = namespace[name]
        return self.helpers[name]


@contextmanager
def open_vllm(tree: VllmTree, modules: Sequence[str]) -> Generator[VllmCode, None, None]:
    """Load vLLM's ``modules`` from ``tree`` for the duration of the ``with`` block."""
    real = frozenset(modules)
    missing = [n for n in sorted(real) if not tree.module_file(n).is_file()]
    if missing:
        raise HarnessError(
            f"{tree.root} is not a vLLM source tree: missing "
            + ", ".join(str(tree.module_file(n)) for n in missing)
        )
    recorder = PlanRecorder()
    with TreeLoader(tree.root, real.__contains__, make_stubs(tree, recorder)) as loader:
        code = VllmCode(tree, tree_era(tree), loader, real, recorder)
        LEDGER.is_strict = False
        for name in modules:  # load everything now: a broken tree fails before any trial
            try:
                loader.load(name)
            except Exception as exc:
                raise HarnessError(
                    f"cannot load {name} from {tree.label}: {type(exc).__name__}: {exc}; the "
                    "modules of harness/fidelity/stubs.py do not provide what it needs"
                ) from exc
        LEDGER.strict()
        try:
            yield code
        finally:
            LEDGER.is_strict = False
