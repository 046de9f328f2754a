"""GoldenStore: explicit update, diff on mismatch, obtained file, deterministic rendering."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.golden import GoldenMismatch, GoldenOutcome, GoldenStore, render


def test_missing_golden_fails_without_update(tmp_path: Path) -> None:
    store = GoldenStore(tmp_path, regenerate_hint="REGEN")
    with pytest.raises(GoldenMismatch, match=r"(?s)does not exist.*REGEN") as info:
        store.check("area/name", {"a": 1})
    assert "REGEN" in str(info.value)
    assert not (tmp_path / "area/name.json").exists()
    assert (tmp_path / "area/name.obtained.json").exists()


def test_update_creates_then_matches_then_updates(tmp_path: Path) -> None:
    writer = GoldenStore(tmp_path, update=True)
    assert writer.check("x", {"b": [1, 2], "a": 0.1234567891}) is GoldenOutcome.CREATED
    reader = GoldenStore(tmp_path)
    assert reader.check("x", {"a": 0.1234567891, "b": [1, 2]}) is GoldenOutcome.MATCHED
    with pytest.raises(GoldenMismatch, match=r"(?s)-\s+2\n.*\+\s+3"):
        reader.check("x", {"a": 0.1234567891, "b": [1, 3]})
    assert (tmp_path / "x.obtained.json").exists()
    assert writer.check("x", {"a": 0.1234567891, "b": [1, 3]}) is GoldenOutcome.UPDATED
    assert not (tmp_path / "x.obtained.json").exists()


def test_render_is_sorted_versioned_and_rounded() -> None:
    text = render({"z": 1, "a": 1 / 3})
    assert text.index('"a"') < text.index('"z"')
    assert '"vllm_version": "0.9.0"' in text
    assert '"vllm_deviations": "docs/fidelity.md"' in text
    assert "0.333333," in text or "0.333333\n" in text
    assert text.endswith("\n")


def test_bad_name_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="bad golden name"):
        GoldenStore(tmp_path).check("../escape", {})


def test_update_flag_is_refused_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    conftest = Path(__file__).with_name("conftest.py").read_text()
    pytester.makeconftest(conftest)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    monkeypatch.setenv("CI", "true")
    result = pytester.runpytest("--update-golden", "-p", "no:xdist")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*--update-golden is refused in CI*"])


def _suite_with_goldens(pytester: pytest.Pytester) -> Path:
    """A copy of our conftest in a pytester dir whose golden root holds one used, one unused file."""
    pytester.makeconftest(Path(__file__).with_name("conftest.py").read_text())
    golden_root = pytester.path.parent / "golden"
    GoldenStore(golden_root, update=True).check("area/used", {"a": 1})
    GoldenStore(golden_root, update=True).check("area/unused", {"b": 2})
    pytester.makepyfile(
        "def test_uses(golden):\n    golden.check('area/used', {'a': 1})\n"
        "def test_other():\n    pass\n"
    )
    return golden_root


def test_unused_golden_fails_a_full_run(pytester: pytest.Pytester) -> None:
    golden_root = _suite_with_goldens(pytester)
    result = pytester.runpytest(str(pytester.path), "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*golden files: 1 unused*", "  area/unused", "*make golden-update*"]
    )
    assert (golden_root / "area/unused.json").exists()


def test_a_partial_run_does_not_judge_unused_goldens(pytester: pytest.Pytester) -> None:
    _suite_with_goldens(pytester)
    result = pytester.runpytest(str(pytester.path), "-p", "no:xdist", "-k", "test_other")
    assert result.ret == pytest.ExitCode.OK


def test_update_deletes_unused_goldens_only(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    golden_root = _suite_with_goldens(pytester)
    result = pytester.runpytest(str(pytester.path), "-p", "no:xdist", "--update-golden")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*golden files: 1 unused, deleted*"])
    assert not (golden_root / "area/unused.json").exists()
    assert (golden_root / "area/used.json").exists()
