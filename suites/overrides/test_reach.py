"""reach: whether the method holding a call can run for the subclass (cycles, super chains)."""

from __future__ import annotations

from pathlib import Path

from harness.overrides.checker import CheckOptions, check
from harness.overrides.findings import Finding, Severity

CYCLE = """\
class Base:
    def {entry}(self):
        return self._a(3)

    def _a(self, n):
        return self._b(n - 1) if n else None

    def _b(self, n):
        self.step(1, scale=2)
        return self._a(n)

    def step(self, x, scale=1):
        return x * scale


class Sub(Base):
{override}    def step(self, x):
        return x
"""


def _findings(tmp_path: Path, source: str) -> list[Finding]:
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    return check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path))).findings


def test_mutually_recursive_private_methods_reached_from_a_public_one(tmp_path: Path) -> None:
    (finding,) = _findings(tmp_path, CYCLE.format(entry="run", override=""))
    assert finding.severity is Severity.ERROR


def test_the_same_cycle_reached_only_from_an_overridden_method(tmp_path: Path) -> None:
    source = CYCLE.format(entry="_start", override="    def _start(self):\n        return None\n\n")
    source += "\n\ndef main(b: Base):\n    return b._start()\n"
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.WARNING
    assert finding.evidence is not None and finding.evidence.unreached is not None


def test_a_super_chain_reaches_the_base_method(tmp_path: Path) -> None:
    source = (
        "class Base:\n    def setup(self):\n        self.step(1, scale=2)\n\n"
        "    def step(self, x, scale=1):\n        return x\n\n\n"
        "class Mid(Base):\n    def setup(self):\n        super().setup()\n\n\n"
        "class Leaf(Mid):\n    def step(self, x):\n        return x\n\n"
        "    def __init__(self):\n        self.setup()\n"
    )
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.ERROR  # Mid.setup runs Base.setup through super()
