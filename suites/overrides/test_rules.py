"""rules: every rule is registered once, documented in the fixed shape, and findable."""

from __future__ import annotations

import re

import pytest

from harness.errors import HarnessError
from harness.overrides.rules import RULES, get

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


def test_drift_rules_have_checks_and_optional_rules_are_off() -> None:
    drift = [c for c, r in RULES.items() if r.check is not None]
    assert drift == [f"HO1{n:02d}" for n in range(1, 11)] + ["HO201"]
    assert {c for c, r in RULES.items() if not r.enabled_by_default} == {"HO201", "HO202"}


def test_lookup_by_code_or_symbol() -> None:
    assert get("ho101").symbol == "renamed-parameter"
    assert get("renamed-parameter").code == "HO101"
    with pytest.raises(HarnessError, match="available: HO101"):
        get("HO999")
