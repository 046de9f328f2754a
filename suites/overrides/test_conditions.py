"""conditions: the tests a call runs under in its function, as the source writes them."""

from __future__ import annotations

from pathlib import Path

from harness.overrides.checker import CheckOptions, check
from harness.overrides.evidence.conditions import Conditions
from harness.overrides.findings import Finding, Severity
from harness.overrides.report import text


def _at(source: str, needle: str) -> tuple[str, ...]:
    for number, line in enumerate(source.split("\n"), 1):
        if needle in line:
            return Conditions(source).at(number, line.index(needle) + 1)
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


TWO_HOPS = """\
class Base:
    def __init__(self, ready):
        self.ready = ready

    def run(self, items):
        if self.ready:
            self._step(items)

    def _step(self, items):
        if items:
            self._apply(items, mode=1)

    def _apply(self, items, mode): ...


class Sub(Base):
    def _apply(self, items): ...
"""


def _one(tmp_path: Path, source: str) -> Finding:
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    result = check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path)))
    assert len(result.findings) == 1, result.findings
    return result.findings[0]


def test_an_error_two_hops_deep_shows_the_outer_hops_condition_first(tmp_path: Path) -> None:
    finding = _one(tmp_path, TWO_HOPS)
    assert finding.severity is Severity.ERROR and finding.evidence is not None
    assert finding.evidence.guards == ("self.ready", "items")
    assert "reached only if self.ready and items" in text(finding)


def test_a_condition_repeated_on_the_path_is_listed_once(tmp_path: Path) -> None:
    finding = _one(tmp_path, TWO_HOPS.replace("if items:", "if self.ready:"))
    assert finding.evidence is not None and finding.evidence.guards == ("self.ready",)


OUTER_QUIET = """\
class Base:
    QUIET = False

    def fire(self):
        if self.QUIET:
            return
        self._fire_one()

    def _fire_one(self):
        self.on_fire(1, loud=True)

    def on_fire(self, n, loud=False): ...


class Sub(Base):
    QUIET = True

    def on_fire(self, n, quiet=False): ...
"""


def test_a_condition_of_an_outer_hop_decided_false_removes_the_path(tmp_path: Path) -> None:
    finding = _one(tmp_path, OUTER_QUIET)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.unreached is not None
    assert "it runs only if not self.QUIET (at m.py:7)" in finding.evidence.unreached
    assert "Sub sets QUIET = True in its class body" in finding.evidence.unreached


def test_another_path_around_a_decided_hop_keeps_the_error(tmp_path: Path) -> None:
    source = OUTER_QUIET.replace(
        "    def _fire_one(self):",
        "    def fire_now(self, now):\n"
        "        if now:\n"
        "            self._fire_one()\n\n"
        "    def _fire_one(self):",
    )
    finding = _one(tmp_path, source)
    assert finding.severity is Severity.ERROR and finding.evidence is not None
    assert finding.evidence.guards == ("now",)


def test_a_constant_true_condition_is_not_listed() -> None:
    source = "def f(self):\n    while True:\n        if self.more:\n            self.g(1)\n"
    assert _at(source, "self.g(") == ("self.more",)


def test_a_loop_body_and_a_comprehension_element_need_their_iterables_not_empty() -> None:
    source = (
        "def f(self, sources):\n"
        "    for ratio, layers in sources.items():\n        self.g(1)\n"
        "    else:\n        self.g(2)\n"
        "    pools = {r: self.g(3) for r, c in self.configs.items() if c.size is not None}\n"
        "    for x in self.g(4):\n        pass\n"
        "    for x in 'abc':\n        self.g(5)\n"
    )
    assert _at(source, "self.g(1)") == ("sources.items() is not empty",)
    assert _at(source, "self.g(2)") == ()
    assert _at(source, "self.g(3)") == ("self.configs.items() is not empty", "c.size is not None")
    assert _at(source, "self.g(4)") == ()
    assert _at(source, "self.g(5)") == ()


LOOP = """\
class Base:
    PREFIXES = "ab"

    def free(self):
        for prefix in sorted(self.PREFIXES):
            self.offload_to(prefix, device=2)

    def offload_to(self, n, device=None): ...


class Sub(Base):
    PREFIXES = ""

    def offload_to(self, n, gpu=None): ...
"""


def test_a_loop_over_a_constant_the_subclass_sets_empty_is_decided(tmp_path: Path) -> None:
    finding = _one(tmp_path, LOOP)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.unreached == (
        "it runs only if sorted(self.PREFIXES) is not empty (at m.py:6), but Sub sets PREFIXES = "
        "'' in its class body, and no method of Sub's classes changes self.PREFIXES"
    )
    kept = _one(tmp_path, LOOP.replace('PREFIXES = ""', 'PREFIXES = "c"'))
    assert kept.severity is Severity.ERROR and kept.evidence is not None
    assert kept.evidence.guards == ("sorted(self.PREFIXES) is not empty",)
