"""The primer goldens (``make primer``, ``scripts/primer_overrides.py``) are consistent on their
own: the run that produces them needs the package index, so it is not a test, but what they
record can be checked offline: one line per finding, sorted, the summary counting them, the
arguments of the project table, and every known true positive present as an error."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harness.golden import parse

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "primer_overrides.py"
_LINE = re.compile(r"^\S+:\d+ HO\d{3} (error|warning)( |$)")


def _primer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("primer_overrides", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("primer_overrides", module)
    spec.loader.exec_module(module)
    return module


PRIMER = _primer()


@pytest.mark.parametrize("project", PRIMER.PROJECTS, ids=lambda p: p.slug)
def test_primer_golden_is_consistent(project: Any, golden: Any) -> None:
    path = PRIMER.golden_path(project)
    assert path.exists(), f"no primer golden for {project.slug}: run `make primer-update`"
    data = parse(path.read_text(encoding="utf-8")).data
    assert isinstance(data, dict)
    lines: list[str] = data["findings"]
    assert lines == sorted(lines)
    assert all(_LINE.match(line) for line in lines), [x for x in lines if not _LINE.match(x)]
    severities = [_LINE.match(line)[1] for line in lines]  # type: ignore[index]
    assert data["summary"] == {
        "errors": severities.count("error"),
        "warnings": severities.count("warning"),
    }
    assert (data["project"], data["version"]) == (project.name, project.version)
    assert data["args"] == list(project.args)
    noted = {k["finding"]: k["note"] for k in data["known_true_positives"]}
    for known in project.known:
        assert noted.get(known.key) == known.note
        assert any(line.startswith(known.key) for line in lines), known.key
        assert " error " in known.key
    assert not any(line.startswith(("/", "<outside>")) for line in lines)
    golden.check(f"primer/{project.slug}", data)
