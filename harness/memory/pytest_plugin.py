"""pytest plugin (``pytest11`` entry point ``harness_memory``): the ``memory_budget`` marker."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        'memory_budget(peak, device="cpu"): fail when the test body\'s peak of live tensor bytes '
        "exceeds peak",
    )
