"""conditions: the tests a call runs under in its function, as the source writes them."""

from __future__ import annotations

from pathlib import Path

from harness.overrides.checker import CheckOptions, check
from harness.overrides.conditions import conditions
from harness.overrides.findings import Severity
from harness.overrides.report import text


def _at(source: str, needle: str) -> tuple[str, ...]:
    for number, line in enumerate(source.split("\n"), 1):
        if needle in line:
            return conditions(source, number, line.index(needle) + 1)
    raise AssertionError(needle)


def test_if_else_and_early_exits_are_listed_outermost_first() -> None:
    source = (
        "def f(self, config):\n"
        "    if not self._hooks:\n        return\n"
        "    if self.n > 0:\n"
        "        if getattr(config, 'x', []):\n            pass\n"
        "        else:\n            self.g(1)\n"
    )
    assert _at(source, "self.g(") == (
        "self._hooks",
        "self.n > 0",
        "not getattr(config, 'x', [])",
    )


def test_short_circuits_conditional_expressions_and_handlers() -> None:
    source = (
        "def f(self):\n"
        "    a = self.ready and self.g(1)\n"
        "    b = self.g(2) if flag else None\n"
        "    try:\n        pass\n    except KeyError:\n        self.g(3)\n"
        "    while self.more:\n        self.g(4)\n"
    )
    assert _at(source, "self.g(1)") == ("self.ready",)
    assert _at(source, "self.g(2)") == ("flag",)
    assert _at(source, "self.g(3)") == ("KeyError is raised",)
    assert _at(source, "self.g(4)") == ("self.more",)


def test_an_unconditional_call_and_a_definition_time_test_give_none() -> None:
    source = "import sys\nif sys.version_info > (3,):\n    def f(self):\n        self.g(1)\n"
    assert _at(source, "self.g(") == ()


SEED = """\
class Builder:
    def build(self, common):
        if self._num_decodes > 0:
            return self._build_decode(block_table_tensor=common)
        return None

    def _build_decode(self, block_table_tensor):
        return block_table_tensor


class Aiter(Builder):
    def _build_decode(self, block_table):
        return block_table
"""


def test_an_error_shows_the_conditions_of_its_call(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SEED, encoding="utf-8")
    result = check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path)))
    (finding,) = result.findings
    assert finding.severity is Severity.ERROR and finding.evidence is not None
    assert finding.evidence.guards == ("self._num_decodes > 0",)
    assert finding.evidence.to_json()["guards"] == ["self._num_decodes > 0"]
    assert "reached only if self._num_decodes > 0" in text(finding)
    assert "reached only if self._num_decodes > 0" in finding.message
