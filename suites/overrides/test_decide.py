"""decide: a ``self.<attr>`` condition decided for a subclass, from which methods fill it."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from harness.overrides.checker import CheckOptions, check
from harness.overrides.decide import KEYWORDS, QUIET, WRITES, touches
from harness.overrides.findings import Finding, Severity


def _touch(source: str, attr: str = "_hooks") -> int:
    func = ast.parse(textwrap.dedent(source)).body[0]
    assert isinstance(func, ast.FunctionDef)
    return touches(func, attr)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(self):\n    if len(self._hooks) == 0:\n        return\n", QUIET),
        ("def f(self):\n    for h in self._hooks:\n        h.remove()\n", QUIET),
        ("def f(self):\n    self._hooks = []\n", QUIET),
        ("def f(self, model):\n    setattr(model, '_hooks', [1])\n", QUIET),
        ("def f(self, v):\n    setattr(self, '_other', v)\n", QUIET),
        ("def f(self, h):\n    self._hooks.append(h)\n", WRITES),
        ("def f(self):\n    self._hooks = [1]\n", WRITES),
        ("def f(self):\n    hooks = self._hooks\n    hooks.append(1)\n", WRITES),
        ("def f(self, name, v):\n    setattr(self, name, v)\n", WRITES),
        ("def f(self, v):\n    object.__setattr__(self, '_hooks', v)\n", WRITES),
        ("def f(self, d):\n    self.__dict__.update(d)\n", WRITES),
        ("def f(self, d):\n    vars(self).update(d)\n", WRITES),
        ("def __setattr__(self, name, value):\n    super().__setattr__(name, value)\n", QUIET),
        (
            "def f(self, **kw):\n    for k, v in kw.items():\n        setattr(self, k, v)\n",
            KEYWORDS,
        ),
        (
            "def f(self, **kw):\n    for k in kw:\n        k = k.lower()\n        setattr(self, k, 1)\n",
            WRITES,  # the name is not only a key any more
        ),
    ],
)
def test_which_uses_may_fill_the_attribute(source: str, expected: int) -> None:
    assert _touch(source) == expected


HOOKS = """\
class Base:
    def register_modules(self, **kwargs):
        for name, module in kwargs.items():
            setattr(self, name, module)

    def offload(self):
        self._all_hooks = []
        self._all_hooks.append(1)

    def free(self):
        if not hasattr(self, "_all_hooks") or len(self._all_hooks) == 0:
            return
        self.offload_to(1, device=2)

    def offload_to(self, n, device=None): ...


class Sub(Base):
    def __init__(self, unet):
        self.register_modules({modules})

    def offload(self):
        return None

    def offload_to(self, n, gpu=None): ...
"""


def _findings(tmp_path: Path, source: str) -> list[Finding]:
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    return check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path))).findings


def test_a_list_tested_by_length_and_filled_only_by_an_overridden_method_is_decided(
    tmp_path: Path,
) -> None:
    # As diffusers 0.42.1's DiffusionPipeline.maybe_free_model_hooks and MusicLDMPipeline.
    (finding,) = _findings(tmp_path, HOOKS.format(modules="unet=unet"))
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.unreached == (
        'it runs only if not (not hasattr(self, "_all_hooks") or len(self._all_hooks) == 0) '
        "(at m.py:13), but only Base.offload() sets self._all_hooks, and it does not run for Sub"
    )


@pytest.mark.parametrize("modules", ["_all_hooks=unet", "**{'unet': unet}"])
def test_a_keyword_setter_whose_calls_may_name_the_attribute_leaves_it_undecided(
    tmp_path: Path, modules: str
) -> None:
    (finding,) = _findings(tmp_path, HOOKS.format(modules=modules))
    assert finding.severity is Severity.ERROR


def test_the_same_test_stays_an_error_when_the_subclass_fills_the_list(tmp_path: Path) -> None:
    filled = HOOKS.format(modules="unet=unet").replace(
        "    def offload(self):\n        return None\n",
        "    def offload(self):\n        super().offload()\n",
    )
    (finding,) = _findings(tmp_path, filled)
    assert finding.severity is Severity.ERROR and finding.evidence is not None
    assert finding.evidence.guards == (
        'not (not hasattr(self, "_all_hooks") or len(self._all_hooks) == 0)',
    )
