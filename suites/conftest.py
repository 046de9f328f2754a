"""Shared pytest setup: one torch thread per worker and the ``golden`` fixture."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

from harness.golden import GoldenOutcome, GoldenStore

torch.set_num_threads(1)

pytest_plugins = ["pytester"]

REPO_ROOT = Path(__file__).resolve().parent.parent
GOLDEN_ROOT = REPO_ROOT / "golden"
_OUTCOME_PROPERTY = "golden_outcome"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("golden", "golden files")
    group.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="write golden files from this run's results (on purpose only; never in CI)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--update-golden") and os.environ.get("CI"):
        raise pytest.UsageError("--update-golden is refused in CI (CI is set)")


class Golden:
    """The ``golden`` fixture: ``golden.check(name, data)`` compares with ``golden/<name>.json``."""

    def __init__(self, store: GoldenStore, node: pytest.Item) -> None:
        self._store = store
        self._node = node

    def check(self, name: str, data: object) -> None:
        outcome = self._store.check(name, data)
        if outcome is not GoldenOutcome.MATCHED:
            self._node.user_properties.append((_OUTCOME_PROPERTY, f"{outcome.value}:{name}"))


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Iterator[Golden]:
    node = request.node
    assert isinstance(node, pytest.Item)
    hint = f"{shlex.quote(node.nodeid)} --update-golden -p no:xdist"
    store = GoldenStore(
        root=GOLDEN_ROOT,
        update=bool(request.config.getoption("--update-golden")),
        regenerate_hint=f".venv/bin/python -m pytest {hint}",
    )
    yield Golden(store, node)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    changes: list[str] = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call":
                continue
            for key, value in getattr(report, "user_properties", []):
                if key == _OUTCOME_PROPERTY:
                    changes.append(str(value))
    if changes:
        created = sum(c.startswith("created:") for c in changes)
        updated = sum(c.startswith("updated:") for c in changes)
        terminalreporter.write_sep("-", f"golden files: {created} created, {updated} updated")
        for change in sorted(changes):
            terminalreporter.write_line(f"  {change}")
