"""The golden plugin on hostile trees: odd entries under ``golden_root`` are reported and ignored
(or fail only the test that checks them), and the header carries only what the project asks for."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness import VLLM_DEVIATIONS, VLLM_VERSION
from suites.golden_support import TWO_TESTS, opted_in, with_goldens

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.mark.parametrize(
    ("make", "entry", "reason"),
    [
        (lambda root: (root / "area" / "dir.json").mkdir(parents=True), "area/dir.json", "a dir"),
        (lambda root: (root / "my file.json").write_text("{}"), "my file.json", "name"),
        (lambda root: (root / "café.json").write_text("{}"), "café.json", "name"),
        (lambda root: (root / "latin.json").write_bytes(b'{"x": "\xe9"}'), "latin.json", "UTF-8"),
        (lambda root: (root / "gone.json").symlink_to(root / "x"), "gone.json", "link to nothing"),
    ],
)
def test_an_odd_entry_under_the_root_is_reported_and_ignored(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    make: object,
    entry: str,
    reason: str,
) -> None:
    root = with_goldens(pytester, monkeypatch)
    make(root)  # type: ignore[operator]
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    assert "golden files: 1 ignored" in out
    line = next(line for line in out.splitlines() if entry in line)
    assert reason in line, line


def test_a_golden_that_is_not_utf8_fails_only_the_test_that_checks_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = with_goldens(pytester, monkeypatch)
    (root / "area" / "a.json").write_bytes(b'{"data": "\xff"}')
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "UnicodeDecodeError" not in out
    assert "area/a.json is not UTF-8" in out


def test_a_golden_root_that_is_a_file_is_one_usage_error(pytester: pytest.Pytester) -> None:
    opted_in(pytester)
    (pytester.path / "golden").write_text("not a directory\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*golden_root*golden is not a directory*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_update_deletes_an_unused_golden_and_its_obtained_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = with_goldens(pytester, monkeypatch)
    pytester.makepyfile(test_golden=TWO_TESTS.replace('"x": 1', '"x": 2'))
    pytester.runpytest("-k", "test_a").assert_outcomes(failed=1)
    assert (root / "area" / "a.obtained.json").is_file()
    pytester.makepyfile(test_golden=TWO_TESTS.replace('golden.check("area/a"', "pass  # ("))
    result = pytester.runpytest("-k", "test_a", "--update-golden")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert not (root / "area" / "a.json").exists()
    assert not (root / "area" / "a.obtained.json").exists()


def _header(path: Path) -> dict[str, object]:
    header: dict[str, object] = json.loads(path.read_text())["header"]
    return header


def test_a_foreign_project_gets_no_vllm_metadata_and_may_add_its_own(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = with_goldens(pytester, monkeypatch)
    header = _header(root / "area" / "a.json")
    assert set(header) == {"format", "generator", "test"}, header
    pytester.makeini(
        "[pytest]\ngolden_root = golden\ngolden_header =\n    team = infra\n    model = llama 3\n"
    )
    pytester.runpytest("--update-golden").assert_outcomes(passed=3)
    header = _header(root / "area" / "a.json")
    assert header["team"] == "infra" and header["model"] == "llama 3"
    assert "vllm_version" not in header


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        ("nokey", "KEY = VALUE"),
        ("test = mine", "'test' is the plugin's own"),
        ("team = a\n    team = b", "'team' is given twice"),
    ],
)
def test_a_bad_header_option_is_one_usage_error(
    pytester: pytest.Pytester, lines: str, says: str
) -> None:
    opted_in(pytester)
    pytester.makeini(f"[pytest]\ngolden_root = golden\ngolden_header =\n    {lines}\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str(), result.stderr.str()


def test_this_projects_own_goldens_carry_the_vllm_version_they_follow() -> None:
    """Our vLLM metadata comes from this repository's ini, kept equal to the package's."""
    root = Path(__file__).resolve().parents[1]
    ini = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    fields = dict(line.split("=", 1) for line in ini["golden_header"])
    assert {k.strip(): v.strip() for k, v in fields.items()} == {
        "vllm_version": VLLM_VERSION,
        "vllm_deviations": VLLM_DEVIATIONS,
    }
