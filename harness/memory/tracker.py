"""Report every storage an aten op creates to a ledger, under a ``TorchDispatchMode``.

``with MemoryTracker(ledger) as tracker: ...`` reports each storage created on a tracked device
(``cpu`` and ``meta`` by default, ``cuda`` on request) as an
:class:`~harness.memory.allocation.Allocation`, and its death as a free. Views allocate nothing;
a storage is freed when it dies, also after the block. With ``all_threads=True`` (the default)
every Python thread is covered (:mod:`harness.memory.threads`).
What it cannot see (a kernel's internal workspace) and its cost: ``docs/simulation.md``.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, cast

import torch

from harness.memory.allocation import Allocation, SourceLine, caller_source
from harness.memory.ledger import Ledger
from harness.memory.threads import ThreadCoverage
from harness.torch_compat import UnwrappedDispatchMode, storage_key


class _StorageRef(weakref.ref[torch.UntypedStorage]):
    """A weak reference to a tracked storage that carries its key, allocation and ledger token."""

    __slots__ = ("allocation", "key", "token")
    key: int
    allocation: Allocation
    token: int


@dataclass(slots=True)
class _OpInfo:
    name: str
    mutable: bool
    aliased_returns: tuple[bool, ...]
    first_return_aliased: bool


_op_info: dict[Any, _OpInfo] = {}


def _info(func: Any) -> _OpInfo:
    info = _op_info.get(func)
    if info is None:
        schema = func._schema
        aliased = tuple(r.alias_info is not None for r in schema.returns)
        info = _OpInfo(
            name=str(func),
            mutable=bool(schema.is_mutable),
            aliased_returns=aliased,
            first_return_aliased=bool(aliased and aliased[0]),
        )
        _op_info[func] = info
    return info


class MemoryTracker(UnwrappedDispatchMode):
    """Reports storages that aten ops create on ``devices`` while it is active to ``ledger``."""

    def __init__(
        self,
        ledger: Ledger | None = None,
        *,
        devices: Iterable[str] = ("cpu", "meta"),
        all_threads: bool = True,
    ) -> None:
        super().__init__()
        self.ledger = Ledger() if ledger is None else ledger
        self.devices = frozenset(devices)
        self.active = False
        """Whether the mode is entered (relays in other threads pass ops through otherwise)."""
        self._coverage = ThreadCoverage(self) if all_threads else None
        self._live: dict[int, _StorageRef] = {}

    def __enter__(self) -> MemoryTracker:
        super().__enter__()  # type: ignore[no-untyped-call]  # pyright: ignore[reportUnknownMemberType]
        self.active = True
        if self._coverage is not None:
            self._coverage.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.active = False
        if self._coverage is not None:
            self._coverage.stop()
        super().__exit__(exc_type, exc, traceback)  # type: ignore[no-untyped-call]  # pyright: ignore[reportUnknownMemberType]

    def account_existing(self, tensors: Iterable[torch.Tensor], label: str) -> int:
        """Report storages of tensors created before the tracker (e.g. weights) as ``label``,
        each once, with source ``None``; returns the bytes the ledger counted for them.
        """
        with self.ledger.lock:
            before = self.ledger.current_bytes
            for tensor in tensors:
                storage = _storage(tensor)
                if storage is None or storage_key(storage) in self._live:
                    continue
                self._add(storage, label, storage.nbytes(), tensor, None)
            return self.ledger.current_bytes - before

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        __tracebackhide__ = True  # pytest: show the user's frame, not the tracker's
        info = _op_info.get(func) or _info(func)
        if info.mutable:  # in-place and out= ops may grow a storage: compare sizes
            kwargs = kwargs or {}
            before = _input_sizes(args, kwargs)
            mutated: Any = func(*args, **kwargs)
            self._observe_outputs(mutated, info, args, before)
            return mutated
        result: Any = func(*args, **kwargs) if kwargs else func(*args)
        out: object = result
        if type(out) is torch.Tensor:  # the common case, kept short
            if not info.first_return_aliased or not _aliases_an_input(out, args):
                self._observe_new(out, info, args)
        elif type(out) in (tuple, list):
            self._observe_outputs(out, info, args, None)
        return result

    def _observe_new(self, tensor: torch.Tensor, info: _OpInfo, args: tuple[Any, ...]) -> None:
        """Output of a non-mutating op that does not alias its inputs: new unless seen."""
        __tracebackhide__ = True
        if tensor.device.type not in self.devices:
            return
        storage = _storage(tensor)
        if storage is None or storage_key(storage) in self._live:
            return
        nbytes = storage.nbytes()
        if nbytes == 0 or any(arg is tensor for arg in args):
            return
        self._add(storage, info.name, nbytes, tensor, caller_source())

    def _observe_outputs(
        self,
        out: object,
        info: _OpInfo,
        args: tuple[Any, ...],
        before: dict[int, int] | None,
    ) -> None:
        __tracebackhide__ = True
        outputs = [out] if isinstance(out, torch.Tensor) else _leaves(cast("Iterable[Any]", out))
        aliased = info.aliased_returns
        for i, item in enumerate(outputs):
            if not isinstance(item, torch.Tensor):
                continue
            if before is not None:
                self._observe_mutated(item, info, before)
            elif not (
                aliased[i] if i < len(aliased) else bool(aliased and aliased[-1])
            ) or not _aliases_an_input(item, args):
                self._observe_new(item, info, args)

    def _observe_mutated(self, tensor: torch.Tensor, info: _OpInfo, before: dict[int, int]) -> None:
        """Output of an in-place/out= op: an allocation only if a storage grew or is new."""
        __tracebackhide__ = True
        if tensor.device.type not in self.devices:
            return
        storage = _storage(tensor)
        if storage is None:
            return
        key = storage_key(storage)
        nbytes = storage.nbytes()
        known = self._live.get(key)
        if known is not None:
            if nbytes > known.allocation.nbytes:  # out= or resize_ grew a tracked storage
                self._grow(known, info.name, nbytes, tensor)
            return
        if key in before:
            if nbytes > before[key]:  # grew a storage we did not track: the new buffer is ours
                self._add(storage, info.name, nbytes, tensor, caller_source())
            return
        if nbytes:
            self._add(storage, info.name, nbytes, tensor, caller_source())

    def _allocation(
        self, op: str, nbytes: int, tensor: torch.Tensor, source: SourceLine | None
    ) -> Allocation:
        return Allocation(
            op,
            nbytes,
            tensor.shape,  # torch.Size is a tuple
            tensor.dtype,
            tensor.device.type,
            source,
            self.ledger.current_region,
        )

    def _add(
        self,
        storage: torch.UntypedStorage,
        op: str,
        nbytes: int,
        tensor: torch.Tensor,
        source: SourceLine | None,
    ) -> None:
        __tracebackhide__ = True
        allocation = self._allocation(op, nbytes, tensor, source)
        ledger = self.ledger
        with ledger.lock:
            token = ledger.allocate(allocation)  # a capacity policy may refuse: nothing changes
            ref = _StorageRef(storage, self._freed)
            ref.key = storage_key(storage)
            ref.allocation = allocation
            ref.token = token
            self._live[ref.key] = ref

    def _grow(self, known: _StorageRef, op: str, nbytes: int, tensor: torch.Tensor) -> None:
        __tracebackhide__ = True
        allocation = self._allocation(op, nbytes, tensor, caller_source())
        ledger = self.ledger
        with ledger.lock:
            token = ledger.allocate(allocation)  # old and new buffers coexist, as in torch
            previous = known.token
            known.allocation = allocation
            known.token = token
            ledger.free(previous)

    def _freed(self, ref: weakref.ref[torch.UntypedStorage]) -> None:
        assert isinstance(ref, _StorageRef)
        with self.ledger.lock:
            if self._live.get(ref.key) is not ref:
                return
            del self._live[ref.key]
            self.ledger.free(ref.token)


def _storage(tensor: torch.Tensor) -> torch.UntypedStorage | None:
    if type(tensor) is not torch.Tensor and not isinstance(tensor, torch.nn.Parameter):
        return None
    try:
        return tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less layouts
        return None


def _leaves(values: Iterable[Any]) -> Iterator[Any]:
    for value in values:
        if isinstance(value, (tuple, list)):
            yield from _leaves(value)  # pyright: ignore[reportUnknownArgumentType]
        else:
            yield value


def _aliases_an_input(tensor: torch.Tensor, args: tuple[Any, ...]) -> bool:
    """Whether ``tensor`` shares a storage with a tensor argument (a schema's ``Tensor(a)`` says an
    op *may* alias; ``aten.contiguous`` or ``aten.to`` under inference mode may still allocate).
    """
    storage = _storage(tensor)
    if storage is None:
        return True
    key = storage_key(storage)
    first = args[0] if args else None
    if type(first) is torch.Tensor and storage_key(first.untyped_storage()) == key:
        return True  # the usual view of the first argument, decided without walking the rest
    for arg in _leaves(args):
        if isinstance(arg, torch.Tensor):
            arg_storage = _storage(arg)
            if arg_storage is not None and storage_key(arg_storage) == key:
                return True
    return False


def _input_sizes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for value in _leaves((args, tuple(kwargs.values()))):
        storage = _storage(value) if isinstance(value, torch.Tensor) else None
        if storage is not None:
            sizes[storage_key(storage)] = storage.nbytes()
    return sizes
