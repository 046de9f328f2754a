"""Threads: carry a tracker into every Python thread, and pin torch to one intra-op thread.

``TorchDispatchMode`` is per thread. :class:`ThreadCoverage` pushes a relay of the tracker into
threads started while it is active (a one-shot ``threading.setprofile`` hook) and into threads
that already exist (a profile hook set in every thread, through
:mod:`harness.cpython_compat` before Python 3.12), and pops it again at exit.
Not covered: threads that run no Python code, threads started with ``_thread`` while a tracker is
active, and memory a kernel allocates internally (``docs/simulation.md``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Generator
from types import FrameType
from typing import TYPE_CHECKING, Any

import torch

from harness.cpython_compat import set_profile_in_other_threads
from harness.torch_compat import UnwrappedDispatchMode, current_dispatch_mode

if TYPE_CHECKING:
    from _typeshed import ProfileFunction

    from harness.memory.tracker import MemoryTracker


class _Relay(UnwrappedDispatchMode):
    """The tracker's stand-in in another thread."""

    def __init__(self, tracker: MemoryTracker) -> None:
        super().__init__()
        self.tracker = tracker

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        tracker = self.tracker
        if tracker.active:
            return tracker.__torch_dispatch__(func, types, args, kwargs)
        return func(*args, **(kwargs or {}))


class ThreadCoverage:
    """Relays of one tracker in every thread but its own, from :meth:`start` to :meth:`stop`;
    coverages nest, so a second tracker never takes a thread away from the first.
    """

    def __init__(self, tracker: MemoryTracker) -> None:
        self.tracker = tracker
        self.owner = 0
        """The thread whose own mode stack holds the tracker (it gets no relay)."""

    def start(self) -> None:
        """Cover threads started from now on, and every other thread that exists now."""
        global _previous_new_thread_hook
        self.owner = threading.get_ident()
        if not _active:
            _previous_new_thread_hook = threading.getprofile()
            threading.setprofile(_on_new_thread)
        _active.append(self)
        set_profile_in_other_threads(_reconcile_once)

    def stop(self) -> None:
        """Stop covering; each thread pops its relay at its next Python event."""
        _active.remove(self)
        if not _active:
            threading.setprofile(_previous_new_thread_hook)
        set_profile_in_other_threads(_reconcile_once)


_active: list[ThreadCoverage] = []
"""Started and not stopped, outermost first."""
_previous_new_thread_hook: ProfileFunction | None = None
_local = threading.local()


def _reconcile() -> None:
    """In the calling thread: pop relays of stopped coverages, push relays of active ones."""
    relays: list[tuple[ThreadCoverage, _Relay]] = _local.__dict__.setdefault("relays", [])
    while relays and relays[-1][0] not in _active:
        if current_dispatch_mode() is not relays[-1][1]:
            break  # another mode was pushed above it: it stays, passing ops through
        relays.pop()[1].__exit__(None, None, None)  # type: ignore[no-untyped-call]
    me = threading.get_ident()
    covered = {id(coverage) for coverage, _ in relays}
    for coverage in list(_active):
        if coverage.owner != me and id(coverage) not in covered:
            relay = _Relay(coverage.tracker)
            relay.__enter__()  # type: ignore[no-untyped-call]
            relays.append((coverage, relay))


def _on_new_thread(frame: FrameType, event: Any, arg: Any) -> None:
    previous = _previous_new_thread_hook
    sys.setprofile(previous)
    _reconcile()
    if previous is not None:
        previous(frame, event, arg)


def _reconcile_once(frame: FrameType | None, event: str, arg: Any) -> None:
    del frame, event, arg
    sys.setprofile(None)
    _reconcile()


@contextlib.contextmanager
def one_torch_thread() -> Generator[None, None, None]:
    """Pin torch to one intra-op thread inside the block (small CPU tensors and meta ops only
    contend, and make run times swing on a loaded machine).
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
