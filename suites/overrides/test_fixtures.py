"""The fixture corpus: every finding the checker reports is annotated in the fixture source.

A fixture is a module or package under ``fixtures/``. Its ``# expect:`` comments say which findings
the checker must report (path, line, code, severity), its ``# evidence:`` comments which calls those
findings must show; nothing else may be reported. The full JSON output is a golden record too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

RULE_CODES = [f"HO{n}" for n in (*range(101, 113), 201, 202, 301, 302)]
FAIL_ON_ERROR = 1
FIXTURES = "suites.overrides.fixtures."
"""The module prefix of the fixtures: they sit in namespace folders of the package suites."""


def _diff(label: str, want: set[Any], got: set[Any]) -> str:
    missing = "\n".join(f"  missing    {x}" for x in sorted(want - got))
    extra = "\n".join(f"  unexpected {x}" for x in sorted(got - want))
    return f"{label} differ from the annotations:\n{missing}\n{extra}"


def _findings(overrides: Any, corpus: Any, name: str, *extra: str) -> list[dict[str, Any]]:
    root = corpus.root / name
    return overrides.json(name, *corpus.args(root), *extra)


@pytest.mark.usefixtures("in_fixtures")
def test_findings_match_annotations(fixture_name: str, overrides: Any, corpus: Any) -> None:
    root = corpus.root / fixture_name
    findings = _findings(overrides, corpus, fixture_name)
    want, got = corpus.expected(root), corpus.observed(findings)
    assert got == want, _diff("findings", want, got)
    want_evidence, got_evidence = corpus.evidence(root), corpus.observed_evidence(findings)
    assert got_evidence == want_evidence, _diff("evidence", want_evidence, got_evidence)


@pytest.mark.usefixtures("in_fixtures")
def test_errors_carry_evidence_and_exit_code(
    fixture_name: str, overrides: Any, corpus: Any
) -> None:
    root = corpus.root / fixture_name
    run = overrides("--format", "json", fixture_name, *corpus.args(root))
    findings = run.json()
    assert all(f["evidence"] is not None for f in findings if f["severity"] == "error")
    has_error = any(e.severity == "error" for e in corpus.expected(root))
    assert run.exit_code == (FAIL_ON_ERROR if has_error else 0), run.err


@pytest.mark.usefixtures("in_fixtures")
def test_golden_record(fixture_name: str, overrides: Any, corpus: Any, golden: Any) -> None:
    findings = _findings(overrides, corpus, fixture_name)
    golden.check(f"overrides/{fixture_name.removesuffix('.py')}", corpus.portable(findings))


@pytest.mark.parametrize("code", RULE_CODES)
def test_every_rule_has_a_fixture_module(code: str, corpus: Any) -> None:
    (module,) = corpus.root.glob(f"{code.lower()}_*.py")
    text = module.read_text(encoding="utf-8")
    assert re.search(r"^# Errors$", text, re.M) and re.search(r"^# OK$", text, re.M)
    assert code in {e.code for e in corpus.expected(module)}
    ok_block = text.split("\n# OK\n", 1)[1]
    assert "# expect:" not in ok_block, f"{module.name}: the OK block must expect nothing"


_AT_CLASS_LINES = {"HO111"}  # a conflict the class's bases create is reported at the class


def test_annotations_sit_on_def_lines(corpus: Any) -> None:
    for expected in corpus.expected(corpus.root):
        line = (
            (corpus.root / expected.path)
            .read_text(encoding="utf-8")
            .splitlines()[expected.line - 1]
        )
        where = r"\s*class\s" if expected.code in _AT_CLASS_LINES else r"\s*(async\s+)?def\s"
        assert re.match(where, line), f"{expected}: not a def/class line: {line!r}"


@pytest.mark.usefixtures("in_fixtures")
def test_minimal_repro_is_a_definite_crash(overrides: Any) -> None:
    (finding,) = overrides.json("minimal_repro")
    assert finding["severity"] == "error"
    # The fixtures sit in a namespace portion of the package `suites`: named from its root.
    assert (finding["class"], finding["method"]) == (f"{FIXTURES}minimal_repro.repro.B", "func")
    assert finding["base_class"] == f"{FIXTURES}minimal_repro.repro.A"
    assert finding["base_path"] == "minimal_repro/repro.py"
    assert finding["evidence"]["text"].strip().startswith("return self.func(a, b=b)")
    assert "got an unexpected keyword argument 'b'" in finding["message"]


@pytest.mark.usefixtures("in_fixtures")
def test_mla_builders_drift_is_exactly_one_error(overrides: Any) -> None:
    (finding,) = overrides.json("mla_drift")
    assert finding["severity"] == "error"
    assert finding["class"] == f"{FIXTURES}mla_drift.rocm_aiter_mla.AiterMLAMetadataBuilder"
    assert finding["method"] == "_build_decode"
    assert finding["base_class"] == f"{FIXTURES}mla_drift.common.MLACommonMetadataBuilder"
    assert finding["base_path"] == "mla_drift/common.py"
    assert "block_table_tensor" in finding["message"]


@pytest.mark.usefixtures("in_fixtures")
def test_mla_builders_fixed_twin_is_clean_even_for_warnings(overrides: Any) -> None:
    run = overrides("--fail-on", "warning", "mla_fixed")
    assert run.exit_code == 0, run.out


def _without(expected: set[Any], *paths: str) -> set[Any]:
    return {e for e in expected if e.path not in paths}


@pytest.mark.usefixtures("in_fixtures")
@pytest.mark.parametrize(
    ("changed", "not_reported"),
    [
        # Only the base changed: its stale subclasses in other files are still reported.
        ("changed_files/base.py", ("changed_files/unrelated.py",)),
        ("changed_files/unrelated.py", ("changed_files/stale.py", "changed_files/leaf.py")),
        ("changed_files/stale.py", ("changed_files/leaf.py", "changed_files/unrelated.py")),
        ("changed_files/middle.py", ("changed_files/stale.py", "changed_files/unrelated.py")),
    ],
)
def test_changed_files_mode(
    changed: str, not_reported: tuple[str, ...], overrides: Any, corpus: Any
) -> None:
    want = _without(corpus.expected(corpus.root / "changed_files"), *not_reported)
    got = corpus.observed(overrides.json("changed_files", "--changed", changed))
    assert got == want, _diff("findings", want, got)


@pytest.mark.usefixtures("in_fixtures")
def test_changed_files_mode_without_a_tree_scans_the_working_directory(
    overrides: Any, corpus: Any
) -> None:
    """What a pre-commit hook runs: only the changed file names, the tree is the current directory."""
    want = _without(corpus.expected(corpus.root / "changed_files"), "changed_files/unrelated.py")
    got = corpus.observed(overrides.json("--changed", "changed_files/base.py"))
    assert got == want, _diff("findings", want, got)


def test_paths_are_relative_to_the_working_directory(
    overrides: Any, corpus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(corpus.root.parent)
    (finding,) = overrides.json(Path("fixtures") / "minimal_repro")
    assert finding["path"] == "fixtures/minimal_repro/repro.py"
    assert finding["evidence"]["path"] == "fixtures/minimal_repro/repro.py"
