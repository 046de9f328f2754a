"""Automatic stubs: what a vLLM tree imports but is not run here (kernels, devices, I/O).

A stub module hands out a stub class for any attribute. While a tree is being imported a stub may
be subclassed, decorated with, called and indexed (import-time code does that to things it never
uses afterwards); once the tree's code runs for a check (:meth:`StubLedger.strict`), *using* a
stub (calling it, reading its attributes, comparing it with ``==`` or ``!=`` to anything but a
class) raises :class:`StubUsed`, which names the stubbed module and attribute (and is recorded in
:attr:`StubLedger.used`). Its truth value, ``in``, iteration and ``len`` are refused always (they
would otherwise answer silently, or never end). ``stub is None`` cannot be intercepted.
"""

from __future__ import annotations

import abc
import importlib
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn


class StubUsed(RuntimeError):
    """vLLM code used something stubbed out here while it ran for a check."""

    def __init__(self, qualname: str, how: str) -> None:
        super().__init__(
            f"vLLM code {how} {qualname}, which is stubbed out here (a kernel, device-only code "
            "or a module not loaded from the tree; to run this path, provide a CPU stand-in "
            "for it among the provided modules)"
        )
        self.qualname = qualname


@dataclass
class StubLedger:
    """Whether using a stub is still allowed (import time), and which ones were refused."""

    used: set[str] = field(default_factory=set[str])
    """Stubs that vLLM code tried to use while strict (each raised :class:`StubUsed`)."""
    is_strict: bool = False

    def strict(self) -> None:
        """From now on, using a stub raises :class:`StubUsed`."""
        self.is_strict = True

    def check(self, qualname: str, how: str) -> None:
        if self.is_strict:
            self.refuse(qualname, how)

    def refuse(self, qualname: str, how: str) -> NoReturn:
        """Refused whether strict or not (a use that would answer silently or never end)."""
        self.used.add(qualname)
        raise StubUsed(qualname, how)

    def compared(self, stub: object, other: object) -> None:
        """``stub == other`` or ``!=``: a use, unless ``other`` is a class (Python's own
        machinery compares classes: ABC caches, ``typing`` unions) or ``stub`` a real class
        or instance that only derives from a stub."""
        cls = stub if isinstance(stub, type) else type(stub)
        if _is_stub(cls) and not isinstance(other, type):
            self.check(cls.__qualname__, "used == or != on")


def _is_stub(cls: type[Any]) -> bool:
    """A stub class (not a real class that derives from one)."""
    return bool(cls.__dict__.get("_is_stub", False))


LEDGER = StubLedger()
"""The process's stub ledger (one tree is loaded at a time in a process)."""


def _equal(stub: object, other: object) -> bool:
    LEDGER.compared(stub, other)
    return stub is other


def _not_equal(stub: object, other: object) -> bool:
    LEDGER.compared(stub, other)
    return stub is not other


class _StubMeta(abc.ABCMeta):
    """Metaclass of stub classes: attributes are further stubs; use is refused when strict.

    It derives from ``ABCMeta`` so that a real class may list a stub among abstract bases; a
    real class derived from a stub is constructed normally.
    """

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        qualname = f"{cls.__qualname__}.{name}"
        LEDGER.check(qualname, "read")
        cache: dict[str, Any] = cls.__dict__["_stub_attributes"]
        if name not in cache:
            cache[name] = make_stub_class(qualname)
        return cache[name]

    def __getitem__(cls, item: object) -> Any:
        return cls  # Generic-style subscripts in annotations and base classes

    # ABCMeta's own register would hide the stub attribute of that name (CustomOp.register).
    @property
    def register(cls) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]  # harness: ignore[HO109]
        return _StubMeta.__getattr__(cls, "register")

    def __call__(cls, *args: object, **kwargs: object) -> Any:
        if not _is_stub(cls):
            return super().__call__(*args, **kwargs)  # a real class with a stub base
        LEDGER.check(cls.__qualname__, "called")
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # a stubbed decorator leaves what it decorates alone
        return super().__call__(*args, **kwargs)

    def __bool__(cls) -> bool:
        if not _is_stub(cls):
            return True  # a real class with a stub base
        LEDGER.refuse(cls.__qualname__, "tested the truth of")

    __eq__ = _equal
    __ne__ = _not_equal
    __hash__ = abc.ABCMeta.__hash__

    # Without __iter__, iter() and ``in`` would go on through __getitem__ forever.
    def __iter__(cls) -> Any:
        LEDGER.refuse(cls.__qualname__, "iterated over")

    def __contains__(cls, item: object) -> bool:
        LEDGER.refuse(cls.__qualname__, "tested membership in")

    def __len__(cls) -> int:
        LEDGER.refuse(cls.__qualname__, "took the length of")

    def __or__(cls, other: object) -> Any:
        return cls  # ``Stub | None`` in annotations evaluated at import time

    def __ror__(cls, other: object) -> Any:
        return cls


class _Stub(metaclass=_StubMeta):
    """Instances accept construction, attributes and calls at import time; truth is refused."""

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
        LEDGER.check(type(self).__qualname__, "called")
        return args[0] if len(args) == 1 and callable(args[0]) and not kwargs else type(self)()

    def __bool__(self) -> bool:
        if not _is_stub(type(self)):  # an instance of a real class with a stub base
            lengths = [vars(c)["__len__"] for c in type(self).__mro__ if "__len__" in vars(c)]
            return bool(lengths[0](self)) if lengths else True
        LEDGER.refuse(type(self).__qualname__, "tested the truth of")

    __eq__ = _equal
    __ne__ = _not_equal
    __hash__ = object.__hash__


def make_stub_class(qualname: str) -> type[Any]:
    """A fresh stub class called ``qualname``."""
    name = qualname.rsplit(".", 1)[-1]
    namespace: dict[str, Any] = {
        "_stub_attributes": {},
        "_is_stub": True,
        "__module__": "vllm-stub",
    }
    stub = _StubMeta(name, (_Stub,), namespace)
    stub.__qualname__ = qualname
    return stub


class StubModule(types.ModuleType):
    """A package whose missing attributes are stub classes (``attrs`` gives the real ones).

    ``submodule(fullname)`` says whether ``fullname`` is a module the loader can import; such an
    attribute is that module (``from vllm import envs`` imports the tree's ``envs``).
    """

    def __init__(
        self,
        name: str,
        attrs: Mapping[str, object] | None = None,
        submodule: Callable[[str], bool] | None = None,
    ) -> None:
        super().__init__(name)
        self.__dict__["__path__"] = []
        self.__dict__["_submodule"] = submodule
        self.__dict__.update(attrs or {})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        submodule = self.__dict__["_submodule"]
        if submodule is not None and submodule(f"{self.__name__}.{name}"):
            return importlib.import_module(f"{self.__name__}.{name}")
        stub = make_stub_class(f"{self.__name__}.{name}")
        setattr(self, name, stub)
        return stub
