"""torch_compat: the private torch hooks, checked at import, and what each one does."""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from harness import torch_compat
from harness.torch_compat import TorchCompatError


def test_every_hook_is_found_in_the_running_torch() -> None:
    assert torch_compat.missing_hooks() == []


def test_a_missing_hook_is_named_with_both_torch_versions() -> None:
    fake = {"torch.overrides": types.SimpleNamespace(_push_mode=object())}

    def load(name: str) -> Any:
        if name not in fake:
            raise ImportError(name)
        return fake[name]

    hooks = (("torch.overrides", "_pop_mode"), ("torch.overrides", "_push_mode"), ("torch.x", "y"))
    missing = torch_compat.missing_hooks(hooks, load)
    assert missing == ["torch.overrides._pop_mode", "torch.x.y"]
    with pytest.raises(TorchCompatError) as raised:
        torch_compat.self_test(missing, version="9.1.0")
    message = str(raised.value)
    assert message == (
        "torch 9.1.0 lacks torch.overrides._pop_mode, torch.x.y; the harness's torch hooks "
        f"(harness.torch_compat) were checked against torch {torch_compat.CHECKED_AGAINST}"
    )
    torch_compat.self_test([])  # nothing missing: no error


def test_importing_it_under_a_torch_without_a_hook_fails_with_one_clear_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The module's own import runs the check (a copy of it, imported under another name, so
    the loaded one stays as it is)."""
    import importlib.util

    monkeypatch.delattr(torch.overrides, "_pop_mode")
    path = torch_compat.__file__
    spec = importlib.util.spec_from_file_location("harness_torch_compat_copy", path)
    assert spec is not None and spec.loader is not None
    with pytest.raises(Exception) as raised:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert type(raised.value).__name__ == "TorchCompatError"
    assert str(raised.value).startswith(
        f"torch {torch.__version__} lacks torch.overrides._pop_mode;"
    )
    assert "checked against torch 2.13" in str(raised.value)


def test_an_unwrapped_mode_keeps_its_own_torch_dispatch() -> None:
    def dispatch(self: Any, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))

    unwrapped = type(
        "Unwrapped", (torch_compat.UnwrappedDispatchMode,), {"__torch_dispatch__": dispatch}
    )
    wrapped = type("Wrapped", (TorchDispatchMode,), {"__torch_dispatch__": dispatch})
    assert unwrapped.__dict__["__torch_dispatch__"] is dispatch
    assert wrapped.__dict__["__torch_dispatch__"] is not dispatch  # torch wraps it for dynamo
    with unwrapped():
        assert torch_compat.current_dispatch_mode() is not None
        assert (torch.ones(2) + 1).tolist() == [2.0, 2.0]
    assert torch_compat.current_dispatch_mode() is None


def test_no_torch_modes_pops_function_and_dispatch_modes_and_restores_them() -> None:
    with TorchFunctionMode(), torch_compat.UnwrappedDispatchMode() as mode:
        assert torch_compat.current_dispatch_mode() is mode
        assert torch._C._len_torch_function_stack() == 1
        with torch_compat.no_torch_modes():
            assert torch_compat.current_dispatch_mode() is None
            assert torch._C._len_torch_function_stack() == 0
        assert torch_compat.current_dispatch_mode() is mode
        assert torch._C._len_torch_function_stack() == 1


def test_storage_key_is_the_storage_not_the_tensor() -> None:
    a = torch.zeros(4)
    view = a[1:]
    other = torch.zeros(4)
    key = torch_compat.storage_key
    assert key(a.untyped_storage()) == key(view.untyped_storage())
    assert key(a.untyped_storage()) != key(other.untyped_storage())
    meta = torch.empty(4, device="meta")
    assert isinstance(key(meta.untyped_storage()), int)
