"""cpython_compat: the interpreter internals, checked at import, and what each one does."""

from __future__ import annotations

import sys
import threading

import pytest

from harness import cpython_compat
from harness.cpython_compat import CPythonCompatError


def test_nothing_is_missing_in_the_running_interpreter() -> None:
    assert cpython_compat.missing_internals() == []


def test_what_each_version_needs() -> None:
    def none(name: str) -> bool:
        return False

    missing = cpython_compat.missing_internals((3, 11), "CPython", none)
    assert missing == [
        "PyInterpreterState_Get",
        "PyInterpreterState_ThreadHead",
        "PyThreadState_Next",
        "PyThreadState_Get",
        "_PyEval_SetProfile",
    ]
    assert cpython_compat.missing_internals((3, 11), "PyPy", none) == [
        "the CPython C API (ctypes.pythonapi)"
    ]
    if hasattr(threading, "setprofile_all_threads"):
        assert cpython_compat.missing_internals((3, 12), "CPython", none) == []
    else:
        assert cpython_compat.missing_internals((3, 12), "CPython", none) == [
            "threading.setprofile_all_threads"
        ]


def test_a_missing_internal_is_named_with_the_versions_checked() -> None:
    with pytest.raises(CPythonCompatError) as raised:
        cpython_compat.self_test(["_PyEval_SetProfile"], running="CPython 3.9.1")
    assert str(raised.value) == (
        "CPython 3.9.1 lacks _PyEval_SetProfile; the harness's interpreter hooks "
        "(harness.cpython_compat) were checked against CPython 3.10 to 3.13"
    )
    cpython_compat.self_test([])


def test_a_profile_hook_runs_in_another_live_thread_and_not_in_this_one() -> None:
    ran: list[int] = []
    ready, seen, stop = threading.Event(), threading.Event(), threading.Event()

    def worker() -> None:
        ready.set()
        while not stop.is_set():
            sum(range(10))  # Python calls: the hook runs at the next one

    def hook(frame: object, event: str, arg: object) -> None:
        del frame, event, arg
        sys.setprofile(None)
        ran.append(threading.get_ident())
        seen.set()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert ready.wait(10)
        cpython_compat.set_profile_in_other_threads(hook)
        assert seen.wait(10)
    finally:
        stop.set()
        thread.join()
    assert threading.get_ident() not in ran and thread.ident in ran
    assert sys.getprofile() is None


def test_getframe_is_the_callers_frame() -> None:
    def inner() -> str:
        return cpython_compat.getframe(1).f_code.co_name

    assert inner() == "test_getframe_is_the_callers_frame"
