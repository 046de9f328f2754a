"""defaults: a condition on a parameter that the call entering the method leaves at None."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.overrides.checker import CheckOptions, check
from harness.overrides.findings import Finding, Severity

# A container whose constructor fills itself only when given items (a module dict's shape).
CONTAINER = """\
class Dict:
    def __init__(self, modules=None):
        if modules is not None:
            self.update(modules)

    def update(self, modules):
        return modules


class Metrics(Dict):
    def __init__(self, names):
        super().__init__({entry})

    def update(self, pred, target):
        return pred
"""

# An optional callback, keyword-only, run only when given (a training loop's shape).
CALLBACK = """\
class Loop:
    def run(self, *, on_step=None):
        return self._step(on_step)

    def _step(self, hook=None):
        if hook:
            self.notify(hook, step=1)

    def notify(self, hook, step):
        return hook


class Quiet(Loop):
    def run(self, *, on_step=None):
        return self._step({entry})

    def notify(self, hook):
        return hook
"""


def _finding(tmp_path: Path, source: str) -> Finding:
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    options = CheckOptions(cache_dir=None, cwd=str(tmp_path))
    (finding,) = check([str(tmp_path)], options=options).findings
    return finding


@pytest.mark.parametrize("source", [CONTAINER, CALLBACK], ids=["container", "callback"])
def test_a_parameter_left_at_none_by_the_entering_call_decides(tmp_path: Path, source: str) -> None:
    finding = _finding(tmp_path, source.format(entry=""))
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    said = str(finding.evidence.unreached)
    assert "leaves " in said and "at its default None" in said


@pytest.mark.parametrize(
    ("source", "entry"),
    [
        (CONTAINER, "names"),  # passed by position
        (CONTAINER, "modules=names"),  # by keyword
        (CONTAINER, "*names"),  # unknown arguments
        (CALLBACK, "print"),
    ],
)
def test_a_parameter_the_call_passes_keeps_the_error(
    tmp_path: Path, source: str, entry: str
) -> None:
    finding = _finding(tmp_path, source.format(entry=entry))
    assert finding.severity is Severity.ERROR, finding.evidence
