"""docs/fidelity.md lists the named deviations by vLLM version exactly as the code knows them."""

from __future__ import annotations

import re
from pathlib import Path

from harness.fidelity.deviation import LISTED
from harness.fidelity.differentials import DIFFERENTIALS

DOC = Path(__file__).resolve().parents[2] / "docs" / "fidelity.md"
SECTION = "## Named deviations of later vLLM, by version"
_VERSION = re.compile(r"^### vLLM (\S+)$", re.M)
_ROW = re.compile(r"^\| `([a-z0-9-]+/[a-z0-9-]+)` \| `([^`]+:\d+)` \|", re.M)


def listed_in_docs() -> dict[str, dict[str, str]]:
    """vLLM version -> {``differential/deviation``: ``file:line``} from docs/fidelity.md."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    headings = list(_VERSION.finditer(section))
    listed: dict[str, dict[str, str]] = {}
    for heading, following in zip(headings, [*headings[1:], None], strict=True):
        body = section[heading.end() : following.start() if following else len(section)]
        rows = _ROW.findall(body)
        listed[heading.group(1)] = dict(rows)
        assert len(rows) == len(listed[heading.group(1)]), "a deviation listed twice"
    return listed


def test_the_document_lists_what_the_code_knows() -> None:
    documented = listed_in_docs()
    assert set(documented) == set(LISTED)
    for version, names in LISTED.items():
        assert set(documented[version]) == names, version
    assert documented["0.9.0"] == {}  # the reference follows 0.9.0


def test_every_listed_deviation_belongs_to_a_differential() -> None:
    known = {f"{d.name}/{v.name}" for d in DIFFERENTIALS for v in d.deviations}
    for version, names in LISTED.items():
        assert names <= known, f"{version}: {sorted(names - known)}"
