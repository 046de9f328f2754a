"""rules: every rule is registered once, documented in the fixed shape, and findable."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_type_hints

import pytest

from harness.errors import HarnessError
from harness.overrides import rules
from harness.overrides.rules import RULES, NoBase, Pair, RuleSet, get
from harness.overrides.suppress import IgnoreComment

SECTIONS = [
    "## What it does",
    "## Why it matters",
    "## Example",
    "## Use instead",
    "## Limitations",
    "## References",
]


@pytest.mark.parametrize("code", list(RULES))
def test_documentation_shape(code: str) -> None:
    rule = RULES[code]
    assert re.fullmatch(r"HO\d{3}", rule.code)
    assert re.fullmatch(r"[a-z]+(-[a-z]+)*", rule.symbol)
    assert rule.doc.startswith(f"{rule.code} {rule.symbol}")
    positions = [rule.doc.find(section) for section in SECTIONS]
    assert all(p > 0 for p in positions) and positions == sorted(positions), code
    why = rule.doc.split("## Why it matters")[1].split("##")[0]
    assert "vLLM" in why and "#17483" in why  # cites the real signature change
    assert rule.description.endswith(".") and "\n" not in rule.description


def test_drift_rules_inspect_pairs_and_optional_rules_are_off() -> None:
    drift = [c for c, r in RULES.items() if r.subject is Pair]
    assert drift == [f"HO1{n:02d}" for n in (*range(1, 11), 12)] + ["HO201"]
    assert {c for c, r in RULES.items() if not r.enabled_by_default} == {"HO201", "HO202"}
    assert set(RuleSet().by_subject) == set(RuleSet(["HO201", "ho202"]).by_subject) - {NoBase}


@pytest.mark.parametrize("code", list(RULES))
def test_check_takes_the_declared_subject(code: str) -> None:
    rule = RULES[code]
    (first, *_) = [v for k, v in get_type_hints(rule.check).items() if k != "return"]
    assert first is rule.subject


RULE_MODULES = Path(rules.__file__).parent
PACKAGE = RULE_MODULES.parent


def _string_constants(tree: ast.Module) -> list[str]:
    """String literals of a module, its docstring excluded (rule docs cross-reference rules)."""
    body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
    return [
        node.value
        for stmt in body
        for node in ast.walk(stmt)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_no_rule_code_outside_its_module() -> None:
    """Rules own their logic: no other module decides anything by a rule's code."""
    code = re.compile(r"HO\d{3}")
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = re.match(r"rules/(ho\d{3})_", rel)
        if own is None:
            assert not code.findall(path.read_text(encoding="utf-8")), rel
            continue
        found = {c for text in _string_constants(tree) for c in code.findall(text)}
        assert found == {own[1].upper()}, rel


def test_ignore_comment_rules() -> None:
    def codes(written: tuple[str, ...], used: frozenset[str]) -> list[tuple[str, str]]:
        comment = IgnoreComment("a.py", 3, written, used)
        return [(r.code, r.format(dict(i.fields))) for r, i in RuleSet().check(comment)]

    assert codes(("HO101",), frozenset({"HO101"})) == []
    assert codes(("HO101", "ho105"), frozenset({"HO101"})) == [
        ("HO301", "unused 'harness: ignore[ho105]' comment")
    ]
    assert [c for c, _ in codes((), frozenset())] == ["HO302"]


def test_lookup_by_code_or_symbol() -> None:
    assert get("ho101").symbol == "renamed-parameter"
    assert get("renamed-parameter").code == "HO101"
    with pytest.raises(HarnessError, match="available: HO101"):
        get("HO999")


def test_every_rule_module_is_registered_once_under_its_own_code() -> None:
    # A new rule file that is not in the registry's list would never run.
    here = Path(rules.__file__).parent
    files = sorted(p.stem for p in here.glob("ho[0-9]*.py"))
    assert [r.module for r in RULES.values()] == [f"harness.overrides.rules.{f}" for f in files]
    for rule in RULES.values():
        assert rule.module.rpartition(".")[2].startswith(rule.code.lower() + "_")
