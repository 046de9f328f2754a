"""The CPython internals the harness uses, reached from here only and checked at import.

A profile hook in every other live thread (``threading.setprofile_all_threads`` on Python 3.12+;
before that the C API it is built on, ``_PyEval_SetProfile``, through ctypes) and
``sys._getframe``. If the running interpreter lacks one, importing this module fails with
:class:`CPythonCompatError`: one line naming what is missing, the running Python, and the
versions these hooks were checked against (:data:`CHECKED_AGAINST`).
"""

from __future__ import annotations

import contextlib
import ctypes
import platform
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from harness.errors import HarnessError

CHECKED_AGAINST = "CPython 3.10 to 3.13"
"""The interpreters whose internals these hooks were read against."""

_C_API = (
    "PyInterpreterState_Get",
    "PyInterpreterState_ThreadHead",
    "PyThreadState_Next",
    "PyThreadState_Get",
    "_PyEval_SetProfile",
)
"""The C functions :func:`set_profile_in_other_threads` calls before Python 3.12."""

ProfileHook = Callable[[FrameType | None, str, Any], object]
"""A profile function as ``sys.setprofile`` takes it (ours never look at the frame)."""


class CPythonCompatError(HarnessError):
    """The running interpreter lacks an internal the harness relies on."""


def missing_internals(
    version: tuple[int, int] = (sys.version_info.major, sys.version_info.minor),
    implementation: str = platform.python_implementation(),
    has_c_function: Callable[[str], bool] = lambda name: hasattr(ctypes.pythonapi, name),
) -> list[str]:
    """The internals this interpreter lacks, by name."""
    missing = [] if hasattr(sys, "_getframe") else ["sys._getframe"]
    if version >= (3, 12):
        if not hasattr(threading, "setprofile_all_threads"):
            missing.append("threading.setprofile_all_threads")
    elif implementation != "CPython":
        missing.append("the CPython C API (ctypes.pythonapi)")
    else:
        missing.extend(name for name in _C_API if not has_c_function(name))
    return missing


def self_test(
    missing: list[str],
    running: str = f"{platform.python_implementation()} {platform.python_version()}",
) -> None:
    """Raise :class:`CPythonCompatError` if anything is ``missing``."""
    if missing:
        raise CPythonCompatError(
            f"{running} lacks {', '.join(missing)}; the harness's interpreter hooks "
            f"(harness.cpython_compat) were checked against {CHECKED_AGAINST}"
        )


self_test(missing_internals())

getframe: Callable[[int], FrameType] = sys._getframe  # pyright: ignore[reportPrivateUsage]
"""``sys._getframe``: the caller's frame ``depth`` levels up, without building a traceback."""


def set_profile_in_other_threads(hook: ProfileHook) -> None:
    """``sys.setprofile(hook)`` in every live Python thread but the calling one."""
    if sys.version_info >= (3, 12):
        mine, new_threads = sys.getprofile(), threading.getprofile()
        threading.setprofile_all_threads(hook)  # also sets these two: put them back
        sys.setprofile(mine)
        threading.setprofile(new_threads)
        return
    _set_profile_through_the_c_api(hook)


_TraceFunc = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.py_object, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p
)
"""C's ``Py_tracefunc``: ``int (*)(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)``."""


def _call_hook(hook: ProfileHook, frame: int | None, what: int, arg: int | None) -> int:
    del frame, what, arg
    with contextlib.suppress(Exception):  # a profile hook must not raise into unrelated code
        hook(None, "call", None)
    return 0


_trampoline = _TraceFunc(_call_hook)
"""Kept for the life of the process: installed hooks point at it."""


def _set_profile_through_the_c_api(hook: ProfileHook) -> None:
    """What Python 3.12's ``threading.setprofile_all_threads`` does, for 3.10 and 3.11."""
    api = ctypes.pythonapi
    interpreter = api["PyInterpreterState_Get"]
    interpreter.restype, interpreter.argtypes = ctypes.c_void_p, []
    head = api["PyInterpreterState_ThreadHead"]
    head.restype, head.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    following = api["PyThreadState_Next"]
    following.restype, following.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    current = api["PyThreadState_Get"]
    current.restype, current.argtypes = ctypes.c_void_p, []
    set_profile = api["_PyEval_SetProfile"]
    set_profile.restype = ctypes.c_int
    set_profile.argtypes = [ctypes.c_void_p, _TraceFunc, ctypes.py_object]
    me = current()  # the calling thread's state (PyThreadState_GetID is no thread ident)
    state = head(interpreter())
    while state:
        if state != me:
            set_profile(state, _trampoline, hook)
        state = following(state)
