"""replacing: a decorator of the tree that returns something else in place of the method."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.overrides.checker import CheckOptions, check
from harness.overrides.evidence.replacing import replacement
from harness.overrides.findings import Finding, Severity

DEPENDENCIES = """\
from typing import overload


class DBInjector:
    def __init__(self, func):
        self.func = func


@overload
def db_injector(func: int) -> int: ...


def db_injector(func):
    \"\"\"Passes a database handle as the first argument.\"\"\"
    return DBInjector(func)
"""

COMPONENTS = """\
from pkg.dependencies import db_injector


class Base:
    def graph(self):
        return self._build_query()

    def _build_query(self):
        return None


class Postgres(Base):
    @db_injector
    def _build_query(self, db):
        return db
"""


def _findings(tmp_path: Path, dependencies: str = DEPENDENCIES) -> list[Finding]:
    package = tmp_path / "pkg"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "dependencies.py").write_text(dependencies, encoding="utf-8")
    (package / "components.py").write_text(COMPONENTS, encoding="utf-8")
    result = check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path)))
    return [f for f in result.findings if f.method == "_build_query"]


@pytest.mark.parametrize(
    ("source", "instead"),
    [
        ("def d(f):\n    return Wrapped(f)\n", "Wrapped(f)"),
        ("def d(f):\n    REGISTRY.append(f)\n", "None"),
        ("def d(f):\n    REGISTRY.append(f)\n    return f\n", None),
        ("def d(f):\n    if f.ok:\n        return f\n    raise TypeError\n", None),
        ("def d(f):\n    if f.ok:\n        return f\n    else:\n        return f\n", None),
        ("def d(f):\n    if f.ok:\n        return other(f)\n    return f\n", "other(f)"),
    ],
)
def test_what_a_decorator_returns_in_place_of_its_argument(
    source: str, instead: str | None
) -> None:
    func = ast.parse(source).body[0]
    assert isinstance(func, ast.FunctionDef)
    assert replacement(func) == instead


def test_a_call_the_def_rejects_is_a_warning_when_a_decorator_replaces_the_method(
    tmp_path: Path,
) -> None:
    # As prefect 3.9.1's @db_injector on AsyncPostgresQueryComponents._build_query.
    (finding,) = _findings(tmp_path)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.untyped == (
        "Postgres._build_query() is decorated with @db_injector, which returns "
        "DBInjector(func) in its place: calls reach that, which the checker does not read"
    )


def test_a_decorator_returning_the_method_itself_leaves_the_error(tmp_path: Path) -> None:
    registering = DEPENDENCIES.replace(
        "return DBInjector(func)", "REGISTRY.append(func)\n    return func"
    )
    (finding,) = _findings(tmp_path, registering)
    assert finding.severity is Severity.ERROR


CASES = """\
import unittest
from unittest import mock


class SourceTest(unittest.TestCase):
    @mock.patch({args})
    def setUp(self, mock_client):
        self.client = mock_client
"""


@pytest.mark.parametrize(
    ("args", "severity"),
    [
        ("'pkg.MongoClient'", Severity.WARNING),
        ("'pkg.MongoClient', new_callable=list", Severity.WARNING),
        ("'pkg.MongoClient', None", Severity.ERROR),
        ("'pkg.MongoClient', new=None", Severity.ERROR),
    ],
)
def test_mock_patch_passes_its_mock_unless_given_the_replacement(
    tmp_path: Path, args: str, severity: Severity
) -> None:
    # As apache-beam 2.77.0's mongodbio_test.MongoSourceTest.setUp.
    (tmp_path / "m_test.py").write_text(CASES.format(args=args), encoding="utf-8")
    result = check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path)))
    (finding,) = [f for f in result.findings if f.method == "setUp"]
    assert finding.severity is severity
