"""harness.golden_plugin through pytester: checks, mismatches, unused files on partial runs, xdist."""

from __future__ import annotations

import shlex
import sys

import pytest

from suites.golden_support import TWO_TESTS, opted_in, owner, with_goldens


def test_a_missing_golden_fails_and_names_the_command_that_creates_it(
    pytester: pytest.Pytester,
) -> None:
    root = opted_in(pytester)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            f"E*golden file {root}/area/a.json does not exist; obtained data written to "
            f"{root}/area/a.obtained.json.",
            f"E*Create it on purpose with: {shlex.quote(sys.executable)} -m pytest "
            "test_golden.py::test_a --update-golden",
            "*golden files: 2 tests failed a golden check*",
        ]
    )
    assert not (root / "area/a.json").exists()


def test_a_mismatch_shows_the_diff_writes_obtained_and_its_command_regenerates(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = with_goldens(pytester, monkeypatch)
    pytester.makepyfile(test_golden=TWO_TESTS.replace('"x": 1', '"x": 2'))
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E*golden mismatch for 'area/a':",
            f"E*--- {root}/area/a.json",
            f"E*+++ {root}/area/a.obtained.json",
            'E*-    "x": 1',
            'E*+    "x": 2',
            "E*If the change is intended, regenerate with: *",
        ]
    )
    assert '"x": 2' in (root / "area/a.obtained.json").read_text()
    assert '"x": 1' in (root / "area/a.json").read_text()
    prefix = "If the changes are intended, regenerate with: "
    (summary,) = [line for line in result.stdout.lines if line.startswith(prefix)]
    command = shlex.split(summary.removeprefix(prefix))
    assert command[:4] == [sys.executable, "-m", "pytest", "test_golden.py::test_a"]
    rerun = pytester.runpytest(*command[3:])
    rerun.assert_outcomes(passed=1)
    rerun.stdout.fnmatch_lines(["*golden files: 0 created, 1 updated, 0 deleted*"])
    assert not (root / "area/a.obtained.json").exists()
    pytester.runpytest().assert_outcomes(passed=3)


def test_a_golden_its_owner_no_longer_checks_fails_a_keyword_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_goldens(pytester, monkeypatch)
    pytester.makepyfile(test_golden=TWO_TESTS.replace('golden.check("area/a", {"x": 1})', "pass"))
    result = pytester.runpytest("-k", "test_a")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "*golden files: 1 unused*",
            "  area/a (its owning test passed without checking it: test_golden.py::test_a)",
            f"Delete them on purpose with: {shlex.quote(sys.executable)} -m pytest -k test_a "
            "*--update-golden",
        ]
    )
    assert pytester.runpytest("-k", "test_b").ret == pytest.ExitCode.OK  # test_a did not run


def test_a_golden_whose_owner_is_gone_fails_runs_that_collect_its_module(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = with_goldens(pytester, monkeypatch)
    pytester.makepyfile(test_golden=TWO_TESTS.replace("def test_b(", "def test_b_renamed("))
    result = pytester.runpytest("-k", "test_a")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["  area/b (its owning test no longer exists: test_golden.py::test_b)"]
    )
    # Named by node id, the module is collected only in part: its other tests are not judged.
    assert pytester.runpytest("test_golden.py::test_a").ret == pytest.ExitCode.OK
    assert pytester.runpytest("--collect-only").ret == pytest.ExitCode.OK
    (root / "area/b.json").unlink()
    pytester.path.joinpath("test_golden.py").rename(pytester.path / "test_moved.py")
    result = pytester.runpytest("-k", "test_a")  # the owner's file is gone from the run's paths
    result.stdout.fnmatch_lines(
        ["  area/a (its owning test no longer exists: test_golden.py::test_a)"]
    )


def test_a_failing_or_skipped_owner_is_not_judged(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_goldens(pytester, monkeypatch)
    pytester.makepyfile(
        test_golden=TWO_TESTS.replace('golden.check("area/a", {"x": 1})', "assert False").replace(
            'golden.check("area/b", {"y": [1, 2]})', "import pytest; pytest.skip('later')"
        )
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    assert "unused" not in result.stdout.str()


def test_one_golden_file_belongs_to_one_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = with_goldens(pytester, monkeypatch)
    tests = TWO_TESTS.replace('"area/b", {"y": [1, 2]}', '"area/a", {"x": 1}')
    pytester.makepyfile(test_golden=tests)
    result = pytester.runpytest("--update-golden")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*golden files: 1 checked by several tests*",
            "  area/a: test_golden.py::test_a, test_golden.py::test_b",
        ]
    )
    pytester.runpytest().stdout.fnmatch_lines(
        ["E*the data match but it belongs to test_golden.py::test_*, not to test_golden.py::test_*"]
    )
    assert not (root / "area/b.json").exists()  # test_b passed without checking it: unused


@pytest.mark.integration  # a nested pytest -n 1 run; the in-process pytester tests cover the rest
def test_works_under_xdist(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    root = with_goldens(pytester, monkeypatch)
    tests = (
        TWO_TESTS.replace('"x": 1', '"x": 2')
        .replace("def test_b(", "def test_c(")
        .replace('"area/b"', '"area/c"')
    )
    pytester.makepyfile(test_golden=tests)
    updated = pytester.runpytest("-n", "1", "-p", "no:hypothesispytest", "--update-golden")
    updated.stdout.fnmatch_lines(
        [
            "*golden files: 1 created, 1 updated, 1 deleted*",
            "  updated: area/a",
            "  created: area/c",
            "  deleted: area/b (its owning test no longer exists: test_golden.py::test_b)",
        ]
    )
    assert owner(root / "area/c.json") == "test_golden.py::test_c"
    assert not (root / "area/b.json").exists()
