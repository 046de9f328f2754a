"""``[tool.harness.overrides]`` in ``pyproject.toml``: discovery, validation, exclusion globs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.errors import HarnessError
from harness.overrides.config import (
    DEFAULT_EXCLUDE,
    Config,
    Excluder,
    discover_config,
    find,
    glob_match,
    load,
)


def _pyproject(directory: Path, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "pyproject.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_nearest_pyproject_with_the_table_wins_and_others_are_passed_over(tmp_path: Path) -> None:
    outer = _pyproject(tmp_path, '[tool.harness.overrides]\nfail-on = "warning"\n')
    _pyproject(tmp_path / "pkg", "[project]\nname = 'pkg'\n")  # no table: passed over
    (tmp_path / "pkg" / "sub").mkdir()
    assert find(["pkg/sub"], str(tmp_path)) == outer
    inner = _pyproject(tmp_path / "pkg" / "sub", "[tool.harness.overrides]\nselect = ['x']\n")
    assert find(["pkg/sub"], str(tmp_path)) == inner
    assert load(inner).select == frozenset({"x"})


def test_discovery_starts_from_the_scanned_path_not_the_working_directory(tmp_path: Path) -> None:
    project = _pyproject(tmp_path / "project", "[tool.harness.overrides]\nignore = ['y']\n")
    (tmp_path / "project" / "src").mkdir()
    (tmp_path / "elsewhere").mkdir()
    config = discover_config(["../project/src"], str(tmp_path / "elsewhere"))
    assert config.path == str(project)
    assert config.ignore == frozenset({"y"})


def test_a_file_path_starts_discovery_in_its_directory(tmp_path: Path) -> None:
    project = _pyproject(tmp_path, "[tool.harness.overrides]\n")
    (tmp_path / "m.py").write_text("", encoding="utf-8")
    assert find(["m.py"], str(tmp_path)) == project


def test_no_file_means_the_built_in_defaults(tmp_path: Path) -> None:
    config = discover_config([], str(tmp_path))
    assert config == Config()
    assert config.exclude == DEFAULT_EXCLUDE


def test_isolated_ignores_every_file(tmp_path: Path) -> None:
    _pyproject(tmp_path, "[tool.harness.overrides]\nbroken = 1\n")
    assert discover_config([], str(tmp_path), isolated=True) == Config()


def test_explicit_config_file_and_missing_one(tmp_path: Path) -> None:
    dedicated = tmp_path / "overrides.toml"
    dedicated.write_text('fail-on = "warning"\n', encoding="utf-8")
    assert discover_config([], str(tmp_path), explicit=str(dedicated)).fail_on == "warning"
    with pytest.raises(HarnessError, match="configuration file not found"):
        discover_config([], str(tmp_path), explicit=str(tmp_path / "nope.toml"))


def test_baseline_is_relative_to_the_configuration_file(tmp_path: Path) -> None:
    path = _pyproject(tmp_path / "proj", '[tool.harness.overrides]\nbaseline = "b.json"\n')
    assert load(path).baseline == str(tmp_path / "proj" / "b.json")


def test_python_names_an_environment_relative_to_the_configuration_file(tmp_path: Path) -> None:
    path = _pyproject(tmp_path / "proj", '[tool.harness.overrides]\npython = ".venv"\n')
    assert load(path).python == str(tmp_path / "proj" / ".venv")


def test_the_configured_environment_is_where_installed_bases_come_from(tmp_path: Path) -> None:
    site = tmp_path / "proj" / "site" / "lib"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(
        "class Engine:\n    def step(self, n): ...\n    def run(self):\n        self.step(n=1)\n",
        encoding="utf-8",
    )
    (tmp_path / "proj" / "app.py").write_text(
        "from lib import Engine\nclass Mine(Engine):\n    def step(self, m): ...\n",
        encoding="utf-8",
    )
    _pyproject(tmp_path / "proj", '[tool.harness.overrides]\npython = "site"\n')
    done = subprocess.run(
        [sys.executable, "-m", "harness.overrides", "--no-cache", "app.py"],
        cwd=tmp_path / "proj", capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "HO101" in done.stdout, done.stdout + done.stderr


def test_exclude_replaces_the_defaults_and_extend_exclude_adds(tmp_path: Path) -> None:
    path = _pyproject(
        tmp_path, '[tool.harness.overrides]\nexclude = ["gen"]\nextend-exclude = ["x_*.py"]\n'
    )
    config = load(path)
    assert config.exclude == ("gen",)
    assert config.extend_exclude == ("x_*.py",)
    assert config.excluder.excluded(str(tmp_path / "a" / "x_1.py"))
    assert not config.excluder.excluded(str(tmp_path / "build"))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[tool.harness.overrides\n", "is not valid TOML"),
        ("[tool.harness.overrides]\nexlude = []\n", "unknown key"),
        ("[tool.harness.overrides]\nexclude = 'gen'\n", "exclude must be a list of strings"),
        ("[tool.harness.overrides]\nfail-on = 'never'\n", "fail-on must be one of"),
        ("[tool.harness.overrides]\nbaseline = 3\n", "baseline must be a string"),
        ("[tool.harness.overrides]\npython = 3\n", "python must be a string"),
        ("[tool.harness]\noverrides = 3\n", "must be a table"),
    ],
)
def test_bad_configuration_is_one_clear_error(tmp_path: Path, body: str, message: str) -> None:
    path = _pyproject(tmp_path, body)
    with pytest.raises(HarnessError, match=message) as caught:
        discover_config([], str(tmp_path))
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("modular_*.py", "modular_llama.py", True),
        ("modular_*.py", "modeling_llama.py", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/pkg/a.py", False),
        ("src/**/*.py", "src/pkg/deep/a.py", True),
        ("src/**/*.py", "src/a.py", True),
        ("**/legacy", "a/b/legacy", True),
        ("file?.py", "file1.py", True),
        ("file[0-3].py", "file4.py", False),
        ("file[!0-3].py", "file4.py", True),
        ("file[]a].py", "file].py", True),  # a ']' first in a class is a member (POSIX)
        ("file[!]].py", "file].py", False),
        ("file[].py", "file[].py", True),  # never closed: literal
        ("a+b.py", "a+b.py", True),
        ("**", "any/thing.py", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("a/**/b", "a/x/y/c", False),
    ],
)
def test_glob_semantics(pattern: str, path: str, matches: bool) -> None:
    assert glob_match(pattern, path) is matches


def test_name_patterns_match_any_component_path_patterns_the_relative_path(tmp_path: Path) -> None:
    excluder = Excluder(["modular_*.py", "pkg/gen/*.py"], str(tmp_path))
    assert excluder.excluded(str(tmp_path / "deep" / "modular_x.py"))
    assert excluder.excluded(str(tmp_path / "pkg" / "gen" / "a.py"))
    assert not excluder.excluded(str(tmp_path / "other" / "pkg" / "gen" / "a.py"))
    assert not excluder.excluded("/somewhere/else/pkg/gen/a.py")
    assert excluder.excluded_below(str(tmp_path / "x" / "modular_y.py"), str(tmp_path))


def test_parent_directories_of_a_named_file_are_judged_too(tmp_path: Path) -> None:
    excluder = Excluder(DEFAULT_EXCLUDE, str(tmp_path))
    assert excluder.excluded_below(str(tmp_path / ".venv" / "lib" / "m.py"), str(tmp_path))
    assert not excluder.excluded_below(str(tmp_path / "pkg" / "m.py"), str(tmp_path))
    # The directory the walk starts from is never judged by its own name.
    assert not excluder.excluded_below(str(tmp_path / "m.py"), str(tmp_path))


def test_adversarial_patterns_and_paths_stay_polynomial(
    operations: Callable[[Callable[[], object]], int],
) -> None:
    def work(n: int) -> int:
        def run() -> None:
            assert not glob_match("**/a*a*a*a*a*b.py", "x/" * n + "a" * (2 * n) + ".py")
            assert not glob_match("**/**/**/**/z", "/".join(["y"] * n))

        return operations(run)

    work(10)  # lazy imports and compiled patterns: the first run's alone
    small, large = work(200), work(400)
    # O(len(pattern) * len(path)): twice the path, about twice the work; exponential: far more.
    assert large / small < 2.6, f"twice the path took {large / small:.2f}x the operations"


# --- through the command line ------------------------------------------------------------

DRIFT = """\
class Base:
    def run(self, a, b=1):
        return a, b

    def go(self):
        return self.run(1, b=2)


class Sub(Base):
    def run(self, a, bb=1):
        return a, bb
"""
WARNING_ONLY = "from app.base import Base\n\n\nclass Other(Base):\n    def run(self, a, b):\n        return a\n"


def _project(root: Path, config: str) -> Path:
    (root / "app").mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("", encoding="utf-8")
    (root / "app" / "base.py").write_text(DRIFT, encoding="utf-8")
    (root / "app" / "modular_base.py").write_text(DRIFT, encoding="utf-8")
    (root / "app" / "other.py").write_text(WARNING_ONLY, encoding="utf-8")
    if config:
        (root / "pyproject.toml").write_text(config, encoding="utf-8")
    return root


def _paths(run: Any) -> set[str]:
    return {f["path"] for f in run.json()}


def test_extend_exclude_and_ignore_from_the_project_file(
    tmp_path: Path, overrides: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path, '[tool.harness.overrides]\nextend-exclude = ["modular_*.py"]\n')
    monkeypatch.chdir(tmp_path)
    run = overrides("--format", "json", "app")
    assert _paths(run) == {"app/base.py", "app/other.py"}
    assert run.exit_code == 1
    ignored = overrides("--format", "json", "--ignore", "removed-default", "app")
    assert {f["code"] for f in ignored.json()} == {"HO101"}


def test_command_line_globs_replace_or_extend(
    tmp_path: Path, overrides: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path, '[tool.harness.overrides]\nextend-exclude = ["modular_*.py"]\n')
    monkeypatch.chdir(tmp_path)
    assert _paths(overrides("--format", "json", "--exclude", "other.py", "app")) == {
        "app/base.py",
        "app/modular_base.py",
    }
    extended = overrides("--format", "json", "--extend-exclude", "app/other.py", "app")
    assert _paths(extended) == {"app/base.py"}


def test_fail_on_and_baseline_come_from_the_project_file(
    tmp_path: Path, overrides: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "m.py").write_text(
        "class Base:\n    def run(self, a):\n        return a\n\n\n"
        "class Sub(Base):\n    def run(self, b):\n        return b\n",
        encoding="utf-8",
    )
    (tmp_path / "pyproject.toml").write_text(
        '[tool.harness.overrides]\nfail-on = "warning"\n', encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    assert overrides("app").exit_code == 1  # a warning fails the run by configuration
    assert overrides("--fail-on", "error", "app").exit_code == 0  # the flag wins
    assert overrides("--write-baseline", "known.json", "app").exit_code == 0
    with (tmp_path / "pyproject.toml").open("a", encoding="utf-8") as handle:
        handle.write('baseline = "known.json"\n')
    assert overrides("app").exit_code == 0  # the configured baseline accepts the warning


def test_a_changed_file_the_configuration_excludes_is_said_and_skipped(
    tmp_path: Path, overrides: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path, '[tool.harness.overrides]\nextend-exclude = ["modular_*.py"]\n')
    monkeypatch.chdir(tmp_path)
    run = overrides("--format", "json", "--changed", "app/modular_base.py")
    assert run.json() == []
    assert "app/modular_base.py is excluded by the configuration" in run.err


def test_bad_configuration_is_one_line_and_isolated_ignores_it(
    tmp_path: Path, overrides: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path, "[tool.harness.overrides]\nexlude = []\n")
    monkeypatch.chdir(tmp_path)
    run = overrides("app")
    assert run.exit_code == 2 and "unknown key(s)" in run.err and run.out == ""
    assert overrides("--isolated", "--format", "json", "app").exit_code == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[tool.black]\nline-length = 99\n", r"has no \[tool\.harness\.overrides\] table"),
        ("[tool.harness]\nother = 1\n", r"has no \[tool\.harness\.overrides\] table"),
        ('fail-on = "warning"\n[tool.black]\nx = 1\n', r"unknown key\(s\): tool; known:"),
    ],
)
def test_a_named_file_with_only_foreign_tables_says_so(
    tmp_path: Path, body: str, message: str
) -> None:
    """``--config my.toml`` with other tools' tables: not "unknown key(s) in
    [tool.harness.overrides]: tool", a table the file does not have."""
    dedicated = tmp_path / "my.toml"
    dedicated.write_text(body, encoding="utf-8")
    with pytest.raises(HarnessError, match=message) as caught:
        discover_config([], str(tmp_path), explicit=str(dedicated))
    assert "in [tool.harness.overrides]" not in str(caught.value)


def test_a_directory_as_the_configuration_file_is_named_so(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="is a directory, not a configuration file"):
        discover_config([], str(tmp_path), explicit=str(tmp_path))
