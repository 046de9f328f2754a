"""pytest plugin (``pytest11`` entry point ``harness_golden``): golden files, opt-in.

Off until a project sets ini ``golden_root`` (relative to the ini file) or ``--golden-root``.
Then the ``golden`` fixture's ``golden.check(name, data)`` compares ``data`` with
``<root>/<name>.json`` (:class:`harness.golden.GoldenStore`), one golden file per owning test; a
mismatch fails with the diff, writes ``<name>.obtained.json`` and prints the command that
regenerates it. ``--update-golden`` writes (refused when ``CI`` is set) and deletes unused files
(their owner passed without checking them, or is gone), also on a partial run. Ini
``golden_header`` (``KEY = VALUE`` lines) adds the project's own header fields. Works under
pytest-xdist: workers report to the controller, which judges.

Only pytest and the standard library are imported (no torch).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from harness.golden import RESERVED_HEADER, GoldenOutcome, GoldenStore

ROOT_INI = "golden_root"
"""The ini option that turns the plugin on: the directory of golden files."""
HEADER_INI = "golden_header"
"""``KEY = VALUE`` lines: header fields of the project's own, written into every golden file."""

_CHECKED = "harness_golden_checked"
_WRITTEN = "harness_golden_written"
_MISMATCHED = "harness_golden_mismatched"
_GONE_OUTPUT = "harness_golden_gone_owners"
_FALSE_CI_VALUES = ("", "0", "false", "no")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness-golden", "golden files (harness.golden)")
    group.addoption(
        "--golden-root",
        metavar="DIR",
        help="directory of golden files; turns golden files on (ini: golden_root)",
    )
    parser.addini(
        ROOT_INI,
        "directory of golden files, relative to the ini file; unset: golden files are off",
        default="",
    )
    parser.addini(
        HEADER_INI,
        "KEY = VALUE lines: fields of your own for every golden file's header",
        type="linelist",
        default=[],
    )
    group.addoption(
        "--update-golden",
        action="store_true",
        help="write golden files from this run's results and delete unused ones "
        "(on purpose only; refused when CI is set)",
    )


def golden_root(config: pytest.Config) -> Path | None:
    """The golden directory from ``--golden-root`` or ini ``golden_root``; ``None``: plugin off."""
    option: str | None = config.getoption("golden_root")
    if option:
        return Path(config.invocation_params.dir, option).resolve()
    ini = str(config.getini(ROOT_INI)).strip()
    if not ini:
        return None
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    return (base / ini).resolve()


def pytest_configure(config: pytest.Config) -> None:
    root = golden_root(config)
    update = bool(config.getoption("update_golden"))
    if root is None:
        if update:
            raise pytest.UsageError(
                "--update-golden: golden files are off in this project "
                f"(set the ini option {ROOT_INI} or pass --golden-root DIR)"
            )
        return
    if root.exists() and not root.is_dir():
        raise pytest.UsageError(f"{ROOT_INI}: {root} is not a directory")
    header = golden_header(config)
    if update and os.environ.get("CI", "").strip().lower() not in _FALSE_CI_VALUES:
        raise pytest.UsageError("--update-golden is refused in CI (CI is set)")
    session = GoldenSession(config, root, update, header)
    config.pluginmanager.register(session, "harness-golden-session")


def golden_header(config: pytest.Config) -> dict[str, str]:
    """The project's own header fields, from ini ``golden_header``; a bad line is a usage error."""
    fields: dict[str, str] = {}
    for line in cast("list[str]", config.getini(HEADER_INI)):
        key, sep, value = (part.strip() for part in line.partition("="))
        if not sep or not key:
            raise pytest.UsageError(f"{HEADER_INI}: {line!r} is not KEY = VALUE")
        if key in RESERVED_HEADER:
            raise pytest.UsageError(f"{HEADER_INI}: {key!r} is the plugin's own header field")
        if key in fields:
            raise pytest.UsageError(f"{HEADER_INI}: {key!r} is given twice")
        fields[key] = value
    return fields


def rerun_command(config: pytest.Config, args: Iterable[str], *, in_rootdir: bool = False) -> str:
    """The shell command that runs this interpreter's pytest with ``args`` from where this run
    started (``in_rootdir``: from the rootdir, where node ids resolve)."""
    here = config.rootpath if in_rootdir else config.invocation_params.dir
    python = Path(sys.executable)
    if python.is_relative_to(here):
        python = python.relative_to(here)
    command = shlex.join([str(python), "-m", "pytest", *args])
    if here != config.invocation_params.dir:
        command = f"cd {shlex.quote(str(here))} && {command}"
    return command


class Golden:
    """The ``golden`` fixture: ``golden.check(name, data)`` compares with ``<root>/<name>.json``."""

    def __init__(self, store: GoldenStore, item: pytest.Item) -> None:
        self._store = store
        self._item = item

    def check(self, name: str, data: object) -> None:
        """Fail the test unless ``data`` matches golden ``name`` (owned by this test)."""
        __tracebackhide__ = True
        record = self._item.user_properties.append
        record((_CHECKED, name))
        try:
            outcome = self._store.check(name, data, test=self._item.nodeid)
        except AssertionError:
            record((_MISMATCHED, name))
            raise
        if outcome is not GoldenOutcome.MATCHED:
            record((_WRITTEN, f"{outcome.value}:{name}"))


@dataclass(frozen=True, slots=True)
class Unused:
    """A golden file no test of this run needs, and why."""

    name: str
    owner: str
    reason: str


class GoldenSession:
    """Per-run state of an opted-in project: the ``golden`` fixture and the run's bookkeeping."""

    def __init__(
        self, config: pytest.Config, root: Path, update: bool, header: dict[str, str]
    ) -> None:
        self.config = config
        self.root = root
        self.update = update
        self.header = header
        self.ignored: list[tuple[str, str]] = []
        """Entries under the root that are no golden file: (relative path, why)."""
        self.checked: defaultdict[str, set[str]] = defaultdict(set)
        """Node id -> golden names it checked (on the controller: from every worker's reports)."""
        self.passed: set[str] = set()
        self.written: list[tuple[str, str]] = []
        """(``created``/``updated``, name) for each golden this run wrote."""
        self.mismatched: dict[str, str] = {}
        """Node id -> a golden name it failed on."""
        self.deselected: set[str] = set()
        self.gone: set[str] = set()
        """Owners of golden files that no longer exist (found while collecting, here or on workers)."""
        self.unused: list[Unused] = []
        self.unowned: list[str] = []
        self.shared: dict[str, list[str]] = {}

    @pytest.fixture
    def golden(self, request: pytest.FixtureRequest) -> Golden:
        """Compare data with golden files: ``golden.check("area/name", data)``."""
        item = request.node
        assert isinstance(item, pytest.Item)
        command = self.regenerate_command([item.nodeid])
        return Golden(GoldenStore(self.root, self.update, command, self.header), item)

    def regenerate_command(self, nodeids: Iterable[str]) -> str:
        """The command that rewrites the golden files of the tests ``nodeids``."""
        args = [*nodeids, "--update-golden"]
        if self.config.getoption("golden_root"):
            args += ["--golden-root", str(self.root)]
        return rerun_command(self.config, args, in_rootdir=True)

    # -- collection (in each worker, or in the only process) --------------------------------

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        self.deselected.update(item.nodeid for item in items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        collected = {item.nodeid for item in session.items} | self.deselected
        modules = {nodeid.split("::", 1)[0] for nodeid in collected}
        modules -= self._partly_selected_modules()
        for owner in GoldenStore(self.root).scan().owners.values():
            if owner is None or owner in collected:
                continue
            module = owner.split("::", 1)[0]
            if module in modules or self._gone_under_collected_paths(module):
                self.gone.add(owner)

    def _partly_selected_modules(self) -> set[str]:
        """Modules this run named with ``::`` (only some of their tests were collected)."""
        here = self.config.invocation_params.dir
        return {
            self._relative(Path(here, arg.partition("::")[0]))
            for arg in self.config.args
            if "::" in arg
        }

    def _gone_under_collected_paths(self, module: str) -> bool:
        path = self.config.rootpath / module
        here = self.config.invocation_params.dir
        bases = [Path(here, arg.partition("::")[0]).resolve() for arg in self.config.args]
        return not path.exists() and any(
            b.is_dir() and path.resolve().is_relative_to(b) for b in bases
        )

    def _relative(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.config.rootpath).as_posix()
        except ValueError:
            return path.as_posix()

    # -- results (on the controller, or in the only process) --------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        if report.passed:
            self.passed.add(report.nodeid)
        for key, value in report.user_properties:
            if key == _CHECKED:
                self.checked[report.nodeid].add(str(value))
            elif key == _WRITTEN:
                outcome, _, name = str(value).partition(":")
                self.written.append((outcome, name))
            elif key == _MISMATCHED:
                self.mismatched.setdefault(report.nodeid, str(value))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """pytest-xdist: a worker finished; take the gone owners it found while collecting."""
        output: dict[str, list[str]] = getattr(node, "workeroutput", {})
        self.gone.update(output.get(_GONE_OUTPUT, ()))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if isinstance(workeroutput, dict):  # an xdist worker: the controller judges
            workeroutput[_GONE_OUTPUT] = sorted(self.gone)
            return
        if self.config.option.collectonly:  # nothing ran: nothing to judge
            return
        self._judge()
        if self.update:
            for unused in self.unused:
                GoldenStore(self.root).delete(unused.name)
        failed = self.unowned or self.shared or (self.unused and not self.update)
        if failed and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _judge(self) -> None:
        users: defaultdict[str, list[str]] = defaultdict(list)
        for nodeid, names in self.checked.items():
            for name in names:
                users[name].append(nodeid)
        self.shared = {name: sorted(ids) for name, ids in users.items() if len(ids) > 1}
        scan = GoldenStore(self.root).scan()
        self.ignored = scan.ignored
        for name, owner in scan.owners.items():
            if owner is None:
                if name not in users:
                    self.unowned.append(name)
            elif owner in self.gone:
                self.unused.append(Unused(name, owner, "its owning test no longer exists"))
            elif owner in self.passed and name not in self.checked[owner]:
                self.unused.append(
                    Unused(name, owner, "its owning test passed without checking it")
                )

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if hasattr(self.config, "workerinput"):
            return
        tr = terminalreporter
        if self.written or (self.update and self.unused):
            created = sum(outcome == "created" for outcome, _ in self.written)
            updated = len(self.written) - created
            deleted = len(self.unused) if self.update else 0
            tr.write_sep(
                "-", f"golden files: {created} created, {updated} updated, {deleted} deleted"
            )
            for outcome, name in sorted(self.written, key=lambda change: change[1]):
                tr.write_line(f"  {outcome}: {name}")
            for unused in self.unused if self.update else ():
                tr.write_line(f"  deleted: {unused.name} ({unused.reason}: {unused.owner})")
        if self.mismatched:
            tr.write_sep(
                "-", f"golden files: {len(self.mismatched)} tests failed a golden check", red=True
            )
            command = self.regenerate_command(sorted(self.mismatched))
            tr.write_line(f"If the changes are intended, regenerate with: {command}")
        if self.unused and not self.update:
            tr.write_sep("-", f"golden files: {len(self.unused)} unused", red=True)
            for unused in self.unused:
                tr.write_line(f"  {unused.name} ({unused.reason}: {unused.owner})")
            args = [*self.config.invocation_params.args, "--update-golden"]
            tr.write_line(f"Delete them on purpose with: {rerun_command(self.config, args)}")
        if self.unowned:
            tr.write_sep("-", f"golden files: {len(self.unowned)} record no owning test", red=True)
            tr.write_line("  " + "\n  ".join(self.unowned))
            tr.write_line(
                "Regenerate them with --update-golden from the tests that check them, or delete them."
            )
        if self.shared:
            tr.write_sep(
                "-", f"golden files: {len(self.shared)} checked by several tests", red=True
            )
            for name, ids in self.shared.items():
                tr.write_line(f"  {name}: {', '.join(ids)}")
        if self.ignored:
            tr.write_sep("-", f"golden files: {len(self.ignored)} ignored", yellow=True)
            for relative, why in self.ignored:
                tr.write_line(f"  {relative} under {self.root}: {why}")
