"""A private registry per test that registers or loads entries: the catalog is process-global."""

from __future__ import annotations

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
