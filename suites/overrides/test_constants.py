"""constants: conditions whose value is fixed whenever Python runs the code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.overrides.checker import CheckOptions, check
from harness.overrides.evidence.constants import names_needed
from harness.overrides.findings import Finding, Severity

MODULE = """\
{imports}


class Base:
    def f(self, a, b):
        return a

    def g(self):
        if {test}:
            return self.f(1, b=2)
        return None


class Sub(Base):
    def f(self, a, bb):
        return a
"""


def _finding(tmp_path: Path, imports: str, test: str) -> Finding:
    (tmp_path / "m.py").write_text(MODULE.format(imports=imports, test=test), encoding="utf-8")
    options = CheckOptions(cache_dir=None, cwd=str(tmp_path))
    (finding,) = check([str(tmp_path)], options=options).findings
    return finding


@pytest.mark.parametrize(
    ("imports", "test"),
    [
        # TorchScript-only branches (a model's forward that scripts differently).
        ("import torch", "torch.jit.is_scripting()"),
        ("import torch.jit as jit", "jit.is_scripting() and self"),
        ("from torch.jit import is_scripting", "is_scripting()"),
        ("from torch import jit", "not (not jit.is_scripting())"),
        # Type-checking-only code (a library's typing shims).
        ("from typing import TYPE_CHECKING", "TYPE_CHECKING"),
        ("import typing", "typing.TYPE_CHECKING and self"),
    ],
)
def test_a_call_that_needs_a_run_time_constant_to_differ_is_a_warning(
    tmp_path: Path, imports: str, test: str
) -> None:
    finding = _finding(tmp_path, imports, test)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    said = str(finding.evidence.unreached)
    assert f"it runs only if {test} (at m.py:" in said and "is fixed: it " in said


@pytest.mark.parametrize(
    ("imports", "test"),
    [
        ("import torch", "not torch.jit.is_scripting()"),  # holds whenever Python runs it
        ("import torch", "torch.jit.is_tracing()"),  # tracing runs the Python code
        ("def is_scripting():\n    return True", "is_scripting()"),  # the project's own
        ("TYPE_CHECKING = True", "TYPE_CHECKING"),  # not typing's
        ("import torch", "torch.jit.is_scripting() or self"),  # `or`: either may hold
    ],
)
def test_anything_else_keeps_the_error(tmp_path: Path, imports: str, test: str) -> None:
    finding = _finding(tmp_path, imports, test)
    assert finding.severity is Severity.ERROR, finding.evidence
    assert finding.evidence is not None and finding.evidence.guards == (test,)


def test_tested_reads_names_and_argument_less_calls_through_not_and_or() -> None:
    test = ast.parse("not (a.b() or c) and d(1)", mode="eval").body
    assert names_needed(test, True) == [("a.b", False), ("c", False)]
    assert names_needed(test, False) == []
