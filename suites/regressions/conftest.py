"""A private registry per test that registers or loads entries (the catalog is process-global),
and sys.path restored after each test."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from harness.regressions import registry


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An empty, not yet loaded registry (built-ins load again on first use)."""
    monkeypatch.setattr(registry, "_entries", {})
    monkeypatch.setattr(registry, "_origins", {})
    monkeypatch.setattr(registry, "_loaded", False)
    yield


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The resolver keeps the user's directories importable for the rest of a run (as
    ``python -m`` does); each test here gets the ``sys.path`` it started with back."""
    monkeypatch.setattr(sys, "path", list(sys.path))
