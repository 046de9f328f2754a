"""Option ``--update-golden``: writes on purpose, records owners, deletes only what its run judged."""

from __future__ import annotations

import pytest

from suites.golden_support import TWO_TESTS, opted_in, owner, with_goldens


def test_update_records_each_golden_with_its_owning_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = with_goldens(pytester, monkeypatch)
    assert owner(root / "area/a.json") == "test_golden.py::test_a"
    assert owner(root / "area/b.json") == "test_golden.py::test_b"
    result = pytester.runpytest()
    result.assert_outcomes(passed=3)
    assert "golden files" not in result.stdout.str()


def test_update_deletes_only_unused_files_of_tests_that_ran(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = with_goldens(pytester, monkeypatch)
    pytester.makepyfile(test_golden=TWO_TESTS.replace("golden.check", "pass  #"))
    result = pytester.runpytest("-k", "test_a", "--update-golden")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*golden files: 0 created, 0 updated, 1 deleted*",
            "  deleted: area/a (its owning test passed without checking it: test_golden.py::test_a)",
        ]
    )
    assert not (root / "area/a.json").exists()
    assert (root / "area/b.json").exists()  # test_b did not run: its file is not touched


def test_the_update_flag_needs_golden_files(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest("--update-golden")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--update-golden: golden files are off in this project (set the ini option golden_root*"]
    )


def test_the_update_flag_is_refused_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = opted_in(pytester)
    monkeypatch.setenv("CI", "true")
    result = pytester.runpytest("--update-golden")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--update-golden is refused in CI (CI is set)*"])
    assert not root.exists()
