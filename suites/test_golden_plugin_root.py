"""Option ``--golden-root`` / ini ``golden_root``: golden files are opt-in, inert elsewhere."""

from __future__ import annotations

import pytest

from suites.golden_support import TWO_TESTS, owner


def test_a_project_without_golden_root_has_no_golden_fixture(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_golden=TWO_TESTS)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["E       fixture 'golden' not found"])
    assert "golden files" not in result.stdout.str()
    assert not (pytester.path / "golden").exists()


def test_a_project_with_its_own_golden_fixture_keeps_it(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def golden():
            return "theirs"
        """
    )
    pytester.makepyfile("def test_theirs(golden):\n    assert golden == 'theirs'\n")
    pytester.runpytest().assert_outcomes(passed=1)
    pytester.makeini("[pytest]\ngolden_root = golden\n")  # opted in: a conftest still wins
    pytester.runpytest().assert_outcomes(passed=1)


def test_the_option_names_the_root_relative_to_the_current_directory(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_golden=TWO_TESTS)
    result = pytester.runpytest("--golden-root", "snapshots", "--update-golden")
    result.stdout.fnmatch_lines(["*golden files: 2 created, 0 updated, 0 deleted*"])
    assert owner(pytester.path / "snapshots/area/a.json") == "test_golden.py::test_a"
    pytester.makepyfile(test_golden=TWO_TESTS.replace('"x": 1', '"x": 2'))
    result = pytester.runpytest("--golden-root", "snapshots")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"*regenerate with: * test_golden.py::test_a --update-golden --golden-root {pytester.path}/snapshots"
        ]
    )


def test_help_lists_the_option_group_and_the_ini_twin(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "golden files (harness.golden):",
            "  --golden-root=DIR*",
            "  --update-golden*",
        ]
    )
    result.stdout.fnmatch_lines(["  golden_root (string):*"])
