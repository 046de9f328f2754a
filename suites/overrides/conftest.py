"""Shared helpers for the override-checker suites: run the CLI, read fixture annotations.

Fixture annotations (see ``fixtures/``):

- ``# expect: HO101`` / ``# expect: HO101 error`` at the end of the line a finding is reported on
  (several, comma-separated); the severity defaults to ``warning``;
- ``# evidence: HO101`` at the end of the line of the call a finding must show as its evidence;
- ``# fixture-args: --flag ...`` on the first line of a fixture module (or of a package's
  ``__init__.py``): extra command-line arguments for that fixture;
- ``# fixture-python-path: DIR`` there: ``DIR`` (under ``fixtures/``) is passed as ``--python``,
  standing for the environment the fixture's installed bases come from;
- ``# fixture-max-python: 3.11`` there: the fixture is skipped on newer interpreters (its
  findings depend on what the running parser can read).

Evidence found outside the fixtures (the standard library) is compared through the golden
record only, with its location made portable (``<outside>/file.py``, no line numbers).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(autouse=True)
def _private_cache_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test gets its own ``XDG_CACHE_HOME``: the machine-wide cache of installed-file
    summaries is never the user's, and no test sees another's entries."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


_CODE = r"HO\d{3}"
_EXPECT = re.compile(rf"#\s*expect:\s*(?P<items>{_CODE}(?:\s+\w+)?(?:\s*,\s*{_CODE}(?:\s+\w+)?)*)")
_EVIDENCE = re.compile(rf"#\s*evidence:\s*(?P<items>{_CODE}(?:\s*,\s*{_CODE})*)")
_ARGS = re.compile(r"^#\s*fixture-args:(?P<args>.*)$")
_RUNNING = re.compile(r"runs on Python \d+\.\d+")
_HEADER = re.compile(r"^#\s*fixture-(?P<key>[a-z-]+):\s*(?P<value>.*)$")
_ROOTS = sorted(
    {str(Path(__file__).resolve().parents[2]), sys.prefix, sys.base_prefix, sys.exec_prefix},
    key=len,
    reverse=True,
)
_OUTSIDE = re.compile(r"(?<![\w.<>])/(?:[^\s:()'\"]+/)*(?P<name>[^\s:/()'\"]+\.pyi?)(?::\d+)?")


@dataclass(frozen=True, order=True)
class Expected:
    """One finding as the fixture's comments describe it."""

    path: str
    line: int
    code: str
    severity: str


def count_operations(run: Callable[[], object]) -> int:
    """How many Python and C functions ``run`` calls (``sys.setprofile``): a measure of work
    that, unlike a wall-clock time, does not depend on what else the machine runs."""
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count


@pytest.fixture
def operations() -> Callable[[Callable[[], object]], int]:
    """:func:`count_operations`, for tests that bound how work grows with the input."""
    return count_operations


def fixture_names() -> list[str]:
    """Every fixture: a top-level module or package under ``fixtures/``."""
    return sorted(
        p.name
        for p in FIXTURES.iterdir()
        if not p.name.startswith((".", "_")) and (p.suffix == ".py" or p.is_dir())
    )


def python_files(root: Path) -> Iterator[Path]:
    """``root`` itself when it is a file, else every ``.py`` file under it."""
    yield from [root] if root.is_file() else sorted(root.rglob("*.py"))


def _relative(path: Path, base: Path) -> str:
    return path.relative_to(base).as_posix()


def expected_findings(root: Path, base: Path = FIXTURES) -> set[Expected]:
    """The ``# expect:`` annotations of every file under ``root``; paths relative to ``base``."""
    found: set[Expected] = set()
    for path in python_files(root):
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = _EXPECT.search(text)
            if match is None:
                continue
            for item in match["items"].split(","):
                code, _, severity = item.strip().partition(" ")
                found.add(Expected(_relative(path, base), number, code, severity or "warning"))
    return found


def expected_evidence(root: Path, base: Path = FIXTURES) -> set[tuple[str, int, str]]:
    """The ``# evidence:`` annotations under ``root`` as ``(path, line, code)``."""
    found: set[tuple[str, int, str]] = set()
    for path in python_files(root):
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = _EVIDENCE.search(text)
            if match is not None:
                found |= {
                    (_relative(path, base), number, c.strip()) for c in match["items"].split(",")
                }
    return found


def fixture_args(root: Path) -> list[str]:
    """Extra CLI arguments from a ``# fixture-args:`` first line."""
    head = root if root.is_file() else root / "__init__.py"
    if not head.exists():
        return []
    first = head.read_text(encoding="utf-8").partition("\n")[0]
    match = _ARGS.match(first)
    site = fixture_header(root, "python-path")
    extra = [] if site is None else ["--python", str(FIXTURES / site)]
    return [*(shlex.split(match["args"]) if match else []), *extra]


def fixture_header(root: Path, key: str) -> str | None:
    """The value of a ``# fixture-<key>:`` line among the first three lines of a fixture."""
    head = root if root.is_file() else root / "__init__.py"
    if not head.exists():
        return None
    for line in head.read_text(encoding="utf-8").splitlines()[:3]:
        match = _HEADER.match(line)
        if match and match["key"] == key:
            return match["value"].strip()
    return None


def portable(value: Any) -> Any:
    """``value`` with paths outside the fixtures (absolute ones) and their line numbers
    replaced, so a golden record does not depend on where Python is installed."""
    if isinstance(value, dict):
        out = {k: portable(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
        for path_key, line_key in (("path", "line"), ("base_path", "base_line")):
            path = out.get(path_key)
            if isinstance(path, str) and path.startswith("<outside>/") and line_key in out:
                out[line_key] = None
        return out
    if isinstance(value, list):
        return [portable(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, str):
        value = _RUNNING.sub("runs on Python <running>", value)
        for root in _ROOTS:  # a root may hold a space, where _OUTSIDE stops
            value = value.replace(root + os.sep, os.sep)
        return _OUTSIDE.sub(lambda m: f"<outside>/{m['name']}", value)
    return value


def observed(findings: list[dict[str, Any]]) -> set[Expected]:
    """The JSON findings in the shape of :class:`Expected`."""
    return {Expected(f["path"], f["line"], f["code"], f["severity"]) for f in findings}


def observed_evidence(findings: list[dict[str, Any]]) -> set[tuple[str, int, str]]:
    return {
        (f["evidence"]["path"], f["evidence"]["line"], f["code"])
        for f in findings
        if f["evidence"] is not None and not f["evidence"]["path"].startswith("/")
    }


@dataclass(frozen=True)
class Run:
    """One ``harness overrides`` invocation."""

    exit_code: int
    out: str
    err: str

    def json(self) -> list[dict[str, Any]]:
        data = json.loads(self.out)
        assert isinstance(data, list), self.out
        return data


class OverridesCLI:
    """Runs ``harness overrides ...`` in-process with its own cache directory."""

    def __init__(self, capsys: pytest.CaptureFixture[str], cache_dir: Path) -> None:
        self._capsys = capsys
        self.cache_dir = cache_dir

    def __call__(self, *args: str | Path, cache: bool = True) -> Run:
        cache_args = ["--cache-dir", str(self.cache_dir)] if cache else ["--no-cache"]
        self._capsys.readouterr()
        try:
            code = main(["overrides", *cache_args, *map(str, args)])
        except SystemExit as exc:  # argparse rejects bad usage itself
            code = exc.code if isinstance(exc.code, int) else 2
        out, err = self._capsys.readouterr()
        assert "Traceback" not in err, err
        return Run(code, out, err)

    def json(self, *args: str | Path, cache: bool = True) -> list[dict[str, Any]]:
        run = self("--format", "json", *args, cache=cache)
        assert run.exit_code in (0, 1), run
        return run.json()


class Corpus:
    """The annotation readers, handed to tests as the ``corpus`` fixture."""

    root = FIXTURES
    names = staticmethod(fixture_names)
    expected = staticmethod(expected_findings)
    evidence = staticmethod(expected_evidence)
    args = staticmethod(fixture_args)
    observed = staticmethod(observed)
    portable = staticmethod(portable)
    observed_evidence = staticmethod(observed_evidence)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise every test that takes ``fixture_name`` over the fixture corpus."""
    if "fixture_name" in metafunc.fixturenames:
        metafunc.parametrize("fixture_name", fixture_names())


@pytest.fixture(autouse=True)
def _fixture_environment(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Apply a parametrised fixture's ``max-python`` header."""
    if "fixture_name" not in request.fixturenames:
        return
    root = FIXTURES / str(request.getfixturevalue("fixture_name"))
    newest = fixture_header(root, "max-python")
    if newest is not None:
        major, minor = (int(p) for p in newest.split("."))
        if sys.version_info[:2] > (major, minor):
            pytest.skip(f"written for Python <= {newest} (the parser reads it on this one)")


@pytest.fixture
def corpus() -> Corpus:
    return Corpus()


@pytest.fixture
def overrides(
    capsys: pytest.CaptureFixture[str], tmp_path_factory: pytest.TempPathFactory
) -> OverridesCLI:
    """``overrides("PATH", ...)`` runs the checker CLI and returns a :class:`Run`."""
    return OverridesCLI(capsys, tmp_path_factory.mktemp("overrides-cache"))


@pytest.fixture
def in_fixtures(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Work from ``fixtures/`` so that reported paths are short and stable."""
    monkeypatch.chdir(FIXTURES)
    return FIXTURES
