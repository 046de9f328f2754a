"""The private torch hooks the harness uses, reached from here only and checked at import.

Each hook is looked up when this module is imported; if the running torch lacks one (a release
that moved or renamed it), the import fails with :class:`TorchCompatError`: one line naming the
hook, the running torch, and the torch these hooks were checked against (:data:`CHECKED_AGAINST`).
Import it only from modules that use torch (the light install has none).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Generator
from typing import Any, cast

import torch
import torch._C
import torch.overrides
import torch.utils._python_dispatch as _python_dispatch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.errors import HarnessError

CHECKED_AGAINST = "2.13"
"""The torch release whose internals these hooks were read against (``major.minor``)."""

HOOKS = (
    ("torch.utils._python_dispatch", "TorchDispatchMode._should_skip_dynamo"),
    ("torch.utils._python_dispatch", "_get_current_dispatch_mode"),
    ("torch.utils._python_dispatch", "_disable_current_modes"),
    ("torch.overrides", "_pop_mode"),
    ("torch.overrides", "_push_mode"),
    ("torch._C", "_len_torch_function_stack"),
    ("torch", "UntypedStorage._cdata"),
)
"""``(module, dotted attribute)`` of every private hook reached below."""


class TorchCompatError(HarnessError):
    """The running torch lacks a private hook the harness relies on."""


def missing_hooks(
    hooks: tuple[tuple[str, str], ...] = HOOKS,
    load: Callable[[str], Any] = importlib.import_module,
) -> list[str]:
    """The hooks of ``hooks`` that cannot be found, as ``module.attribute``."""
    missing: list[str] = []
    for module, dotted in hooks:
        try:
            found: Any = load(module)
        except ImportError:
            missing.append(f"{module}.{dotted}")
            continue
        for part in dotted.split("."):
            found = getattr(found, part, None)
            if found is None:
                missing.append(f"{module}.{dotted}")
                break
    return missing


def self_test(missing: list[str], version: str = torch.__version__) -> None:
    """Raise :class:`TorchCompatError` if any hook is ``missing``."""
    if missing:
        raise TorchCompatError(
            f"torch {version} lacks {', '.join(missing)}; the harness's torch hooks "
            f"(harness.torch_compat) were checked against torch {CHECKED_AGAINST}"
        )


self_test(missing_hooks())


class UnwrappedDispatchMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """A dispatch mode whose ``__torch_dispatch__`` torch does not wrap to disable dynamo.

    That wrapper disables dynamo for every frame below it, making each op markedly slower
    (``scripts/bench_tracker.py``). For eager runs only, not while ``torch.compile`` traces.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)  # type: ignore[no-untyped-call]

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # pyright: ignore[reportUnknownMemberType]

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False


def current_dispatch_mode() -> object:
    """The innermost dispatch mode of the calling thread (``None`` if none)."""
    get = cast("Callable[[], object]", _python_dispatch._get_current_dispatch_mode)  # pyright: ignore[reportPrivateUsage]
    return get()


def disable_current_modes() -> contextlib.AbstractContextManager[object]:
    """A context that pops every dispatch mode of this thread, restoring them on exit."""
    disable = cast(
        "Callable[[], contextlib.AbstractContextManager[object]]",
        _python_dispatch._disable_current_modes,  # pyright: ignore[reportPrivateUsage]
    )
    return disable()


@contextlib.contextmanager
def no_torch_modes() -> Generator[None, None, None]:
    """Run the block with no torch function mode and no dispatch mode of this thread active."""
    pop_mode = cast("Callable[[], object]", torch.overrides._pop_mode)  # pyright: ignore[reportPrivateUsage]
    push_mode = cast("Callable[[object], None]", torch.overrides._push_mode)  # pyright: ignore[reportPrivateUsage, reportUnknownMemberType]
    depth: int = torch._C._len_torch_function_stack()  # pyright: ignore[reportPrivateUsage]
    function_modes = [pop_mode() for _ in range(depth)]
    try:
        with disable_current_modes():
            yield
    finally:
        for mode in reversed(function_modes):
            push_mode(mode)


def storage_key(storage: torch.UntypedStorage) -> int:
    """Identity of the C++ storage (stable while it lives; meta storages have no data pointer)."""
    key: int = storage._cdata  # pyright: ignore[reportPrivateUsage]
    return key
