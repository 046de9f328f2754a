"""One vLLM tree loaded in this process: the loader, the platform and the FlashInfer recorder.

:func:`open_tree` installs the :class:`~harness.vllm_tree.loader.TreeLoader` with the provided
modules, loads the tree's ``vllm.platforms.interface`` and makes ``current_platform`` from it.
:meth:`TreeSession.backend_class` imports one backend; a failure becomes a
:class:`BackendUnavailable` naming what stopped it (the exception and the tree's raising line).
"""

from __future__ import annotations

import traceback
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils.deterministic

from harness.adapter.backends import BackendEntry
from harness.adapter.platform import PlatformOptions, make_platform
from harness.adapter.stubs import is_real, patches, provided_modules
from harness.child import mark
from harness.errors import HarnessError
from harness.vllm_tree.loader import TreeLoader
from harness.vllm_tree.provided import PlanRecorder
from harness.vllm_tree.stubbing import LEDGER
from harness.vllm_tree.tree import VllmTree


@dataclass(frozen=True, slots=True)
class RaisedAt:
    """An exception raised by the tree's code: type, message and the tree's innermost line."""

    type: str
    message: str
    where: str
    """``path:line`` (relative to the tree) of the innermost frame in the tree, or ``""``."""

    def describe(self) -> str:
        at = f" at {self.where}" if self.where else ""
        return f"{self.type}: {self.message}{at}"


def raised_at(tree: VllmTree, error: BaseException) -> RaisedAt:
    """Where in ``tree`` ``error`` was raised (the innermost frame whose file is in the tree)."""
    where = ""
    root = str(tree.root) + "/"
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename.startswith(root):
            where = f"{frame.filename[len(root) :]}:{frame.lineno}"
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return RaisedAt(type(error).__name__, message, where)


class BackendUnavailable(HarnessError):
    """A backend of the tree that cannot be driven here: which import or call stops it."""

    def __init__(self, name: str, stage: str, cause: RaisedAt | str) -> None:
        text = cause if isinstance(cause, str) else cause.describe()
        super().__init__(f"{name}: {stage} stops it: {text}")
        self.name = name
        self.stage = stage
        self.cause = cause


@dataclass
class TreeSession:
    """A loaded tree (see the module docstring)."""

    tree: VllmTree
    options: PlatformOptions
    loader: TreeLoader
    recorder: PlanRecorder

    def module(self, name: str) -> Any:
        return self.loader.load(name)

    def backend_class(self, entry: BackendEntry) -> type[Any]:
        """The backend class of ``entry``, imported from the tree."""
        mark(f"importing {entry.module}")
        try:
            module = self.loader.load(entry.module)
            backend: type[Any] = getattr(module, entry.class_name)
        except Exception as exc:
            raise BackendUnavailable(
                entry.name, f"importing {entry.module}", raised_at(self.tree, exc)
            ) from exc
        return backend


@contextmanager
def open_tree(tree: VllmTree, options: PlatformOptions) -> Generator[TreeSession]:
    """Load ``tree`` in this process for the ``with`` block (then restore ``sys.modules``)."""
    recorder = PlanRecorder()
    loader = TreeLoader(
        tree.root, is_real, provided_modules(tree, options, recorder), patches(options)
    )
    loader.install()
    LEDGER.is_strict = False
    # torch.empty's contents become a known value (NaN, or the dtype's max), so that two runs of
    # the same tree build the same metadata (builders hand out slices of empty buffers).
    deterministic: tuple[bool, bool, bool] = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        bool(torch.utils.deterministic.fill_uninitialized_memory),  # type: ignore[attr-defined]
    )
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
    try:
        try:
            interface = loader.load("vllm.platforms.interface")
        except Exception as exc:
            raise HarnessError(
                f"{tree.label}: cannot load vllm/platforms/interface.py: "
                f"{raised_at(tree, exc).describe()}"
            ) from exc
        loader.provided["vllm.platforms"].current_platform = make_platform(interface, options)  # type: ignore[attr-defined]
        yield TreeSession(tree, options, loader, recorder)
    finally:
        LEDGER.is_strict = False
        loader.uninstall()
        torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
        torch.utils.deterministic.fill_uninitialized_memory = deterministic[2]  # type: ignore[attr-defined]
