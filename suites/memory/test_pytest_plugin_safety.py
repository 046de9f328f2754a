"""The memory plugin in a project it does not know: its names, its markers, its failures."""

from __future__ import annotations

import pytest
from plugin_support import _import_lazy_torch_modules  # noqa: F401  # pyright: ignore[reportUnusedImport]

from harness.memory import pytest_plugin


def test_a_project_with_its_own_memory_tracker_fixture_gets_normal_failures(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def memory_tracker():
            return {"theirs": True}

        @pytest.fixture
        def harness_memory_tracker():
            return "also theirs"
        """
    )
    pytester.makepyfile(
        """
        def test_fails(memory_tracker):
            assert not memory_tracker["theirs"]

        def test_fails_too(harness_memory_tracker):
            assert harness_memory_tracker == "mine"

        def test_passes(memory_tracker, harness_memory_tracker):
            assert memory_tracker == {"theirs": True}
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=2)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["E       assert not True", "E       AssertionError: assert *"])


def test_a_failure_inside_the_plugin_fails_that_test_and_the_session_goes_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(pytest_plugin, "_judge", broken)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.memory_budget(peak="1 MiB")
        def test_budgeted():
            pass

        def test_plain():
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*harness memory plugin failed on this test: RuntimeError: boom"])
    assert "INTERNALERROR" not in result.stdout.str()
