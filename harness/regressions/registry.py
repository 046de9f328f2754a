"""The catalog by id: the built-in entries, then installed packages' entries, then registered ones.

A plain dict, filled on first use from an explicit list of built-in modules (each exposes
``REGRESSION``; importing one registers nothing) and from the ``harness.regressions`` entry-point
group, whose entries load to a :class:`~harness.regressions.entry.Regression` or an iterable of
them. :func:`register_regression` adds one at run time. A duplicate id is rejected loudly, and an
unknown id lists the known ones.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Iterable, Iterator, Mapping
from typing import cast

from harness.errors import HarnessError
from harness.regressions.entry import Regression

ENTRY_POINT_GROUP = "harness.regressions"
"""Installed packages add entries with ``[project.entry-points."harness.regressions"]``."""

BUILTIN_MODULES = (
    "harness.regressions.aiter_build_decode_rename",
    "harness.regressions.flashinfer_global_config",
    "harness.regressions.flashinfer_oom",
    "harness.regressions.aiter_mla_last_page_len",
    "harness.regressions.cascade_prefix_schedule",
    "harness.regressions.dummy_run_null_block",
)

_entries: dict[str, Regression] = {}
_origins: dict[str, str] = {}
_loaded = False


def _add(regression: object, origin: str) -> None:
    if not isinstance(regression, Regression):
        raise HarnessError(
            f"{origin} gave {type(regression).__name__}, not a harness.regressions.Regression"
        )
    if regression.id in _entries:
        raise HarnessError(
            f"duplicate regression id {regression.id!r}: from {origin}, already registered "
            f"from {_origins[regression.id]}"
        )
    _entries[regression.id] = regression
    _origins[regression.id] = origin


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    try:
        for module_name in BUILTIN_MODULES:
            _add(importlib.import_module(module_name).REGRESSION, module_name)
        for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            _load_entry_point(entry_point)
    except BaseException:
        # Never leave a partial catalog behind: every later lookup fails the same way.
        _entries.clear()
        _origins.clear()
        _loaded = False
        raise


def _load_entry_point(entry_point: importlib.metadata.EntryPoint) -> None:
    origin = f"entry point {entry_point.name!r} ({entry_point.value})"
    try:
        loaded: object = entry_point.load()
    except Exception as exc:
        raise HarnessError(f"{origin} failed to load: {type(exc).__name__}: {exc}") from exc
    regressions: Iterable[object] = (
        cast(Iterable[object], loaded) if isinstance(loaded, Iterable) else (loaded,)
    )
    for regression in regressions:
        _add(regression, origin)


def register_regression(regression: Regression, *, origin: str | None = None) -> Regression:
    """Add ``regression`` to the catalog (a taken id raises); returns it, so it can decorate."""
    _load()
    _add(regression, origin or "register_regression()")
    return regression


def unregister_regression(regression_id: str) -> None:
    """Remove an entry added with :func:`register_regression` (built-ins stay)."""
    _load()
    if _origins.get(regression_id, "").startswith("harness.regressions."):
        raise HarnessError(f"{regression_id!r} is built in; it cannot be removed")
    _entries.pop(regression_id, None)
    _origins.pop(regression_id, None)


def get_regression(regression_id: str) -> Regression:
    """The entry called ``regression_id``; an unknown id lists the available ones."""
    _load()
    try:
        return _entries[regression_id]
    except KeyError:
        raise HarnessError(
            f"unknown regression {regression_id!r}; available: {', '.join(available_regressions())}"
        ) from None


def is_builtin(regression_id: str) -> bool:
    """Whether ``regression_id`` is one of this package's own entries (not a user's)."""
    _load()
    return _origins.get(regression_id, "") in BUILTIN_MODULES


def available_regressions() -> list[str]:
    """Every registered id, sorted."""
    _load()
    return sorted(_entries)


class _Catalog(Mapping[str, Regression]):
    """Read-only view of the registry (loads it on first use)."""

    def __getitem__(self, key: str) -> Regression:
        _load()
        return _entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(available_regressions())

    def __len__(self) -> int:
        _load()
        return len(_entries)


REGRESSIONS: Mapping[str, Regression] = _Catalog()
"""Every registered entry by id."""
