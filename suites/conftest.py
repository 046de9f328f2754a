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
_USED_PROPERTY = "golden_used"
_used_goldens: set[str] = set()
"""Golden names checked in this run (on the controller: gathered from every worker's reports)."""
_golden_changes: list[str] = []
"""``created:NAME`` / ``updated:NAME`` for each golden this run wrote."""


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
        self._node.user_properties.append((_USED_PROPERTY, name))
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


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for key, value in report.user_properties:
        if key == _USED_PROPERTY:
            _used_goldens.add(str(value))
        elif key == _OUTCOME_PROPERTY and report.when == "call":
            _golden_changes.append(str(value))


def _ran_every_golden_test(session: pytest.Session) -> bool:
    """Whether this run covered every test that may check a golden file (the whole suite)."""
    option = session.config.option
    whole_suite = [Path(arg).resolve() for arg in session.config.args] in (
        [Path(__file__).resolve().parent],
        [REPO_ROOT],
    )
    unfiltered = not option.keyword and option.markexpr in ("", "not gpu")
    return whole_suite and unfiltered and not getattr(option, "lf", False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Unused golden files fail a full, green run (syrupy's default); --update-golden deletes them."""
    if hasattr(session.config, "workerinput") or exitstatus != 0:
        return
    if not _ran_every_golden_test(session):
        return
    on_disk = {
        path.relative_to(GOLDEN_ROOT).with_suffix("").as_posix()
        for path in GOLDEN_ROOT.rglob("*.json")
        if not path.name.endswith(".obtained.json")
    }
    unused = sorted(on_disk - _used_goldens)
    if not unused:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.ensure_newline()
    if session.config.getoption("--update-golden"):
        for name in unused:
            (GOLDEN_ROOT / f"{name}.json").unlink()
        if reporter is not None:
            reporter.write_sep("-", f"golden files: {len(unused)} unused, deleted")
            reporter.write_line("  " + "\n  ".join(unused))
        return
    if reporter is not None:
        reporter.write_sep(
            "-", f"golden files: {len(unused)} unused (no test checks them)", red=True
        )
        reporter.write_line("  " + "\n  ".join(unused))
        reporter.write_line("Delete them, or remove them on purpose with: make golden-update")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    changes = _golden_changes
    if changes:
        created = sum(c.startswith("created:") for c in changes)
        updated = sum(c.startswith("updated:") for c in changes)
        terminalreporter.write_sep("-", f"golden files: {created} created, {updated} updated")
        for change in sorted(changes):
            terminalreporter.write_line(f"  {change}")
