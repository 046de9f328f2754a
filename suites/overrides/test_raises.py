"""raises: calls after a ``self`` method that always raises for one subclass."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.overrides.checker import CheckOptions, check
from harness.overrides.discover import discover
from harness.overrides.evidence.named_classes import self_call
from harness.overrides.evidence.raises import Raisers
from harness.overrides.findings import Finding, Severity
from harness.overrides.model.resolve import Project
from harness.overrides.summary import summarize

MODELS = """\
import contextlib


class Model:
    def _validate_can_fix_params(self, names):
        if "x" in names:
            raise ValueError("cannot fix x")

    @contextlib.contextmanager
    def fix_params(self, params):
        names = set(params)
        self._validate_can_fix_params(names)
        try:
            yield
        finally:
            pass

    def fit_constrained(self, constraints, start_params=None):
        with self.fix_params(constraints):
            res = self.fit(start_params)
        return res

    def fit(self, start_params=None):
        return start_params


class RecursiveLS(Model):
    def _validate_can_fix_params(self, names):
        raise ValueError("constraints are given when the model is built")

    def fit(self):
        return 0
"""


def _findings(tmp_path: Path, source: str) -> list[Finding]:
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    return check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path))).findings


@pytest.mark.parametrize(
    ("source", "method"),
    [
        ("self.check()", "check"),
        ("x = self.check(1)", "check"),
        ("return self.check()", "check"),
        ("await self.check()", "check"),
        ("other.check()", None),
        ("x = 1 if c else self.check()", None),
    ],
)
def test_which_statements_are_a_self_call(source: str, method: str | None) -> None:
    stmt = ast.parse(source if "await" not in source else f"async def f():\n {source}")
    node = stmt.body[0]
    if isinstance(node, ast.AsyncFunctionDef):
        node = node.body[0]
    assert self_call(node, "self") == method


def test_a_context_manager_that_always_raises_for_the_subclass_makes_the_call_unreached(
    tmp_path: Path,
) -> None:
    # As statsmodels 0.15.0's MLEModel.fit_constrained and RecursiveLS.
    (finding,) = _findings(tmp_path, MODELS)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.unreached == (
        "with self.fix_params(...) (at m.py:19) comes before it, and Model.fix_params() calls "
        "self._validate_can_fix_params(...) first, and "
        "RecursiveLS._validate_can_fix_params() raises ValueError whenever it is called "
        "(m.py:29)"
    )


def test_a_method_that_always_raises_before_the_call_makes_it_unreached(
    tmp_path: Path,
) -> None:
    source = MODELS.replace(
        "        with self.fix_params(constraints):\n            res = self.fit(start_params)\n",
        "        self._validate_can_fix_params(constraints)\n"
        "        if constraints:\n            res = self.fit(start_params)\n",
    )
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.unreached is not None
    assert finding.evidence.unreached.startswith(
        "self._validate_can_fix_params(...) (at m.py:19) comes before it, and "
        "RecursiveLS._validate_can_fix_params() raises ValueError"
    )


@pytest.mark.parametrize(
    "change",
    [
        # the override may return
        (
            '        raise ValueError("constraints',
            '        if names:\n            return\n        raise ValueError("constraints',
        ),
        # the override raises only under a condition
        (
            '        raise ValueError("constraints',
            '        if names:\n            raise ValueError("constraints',
        ),
        # the generator yields before validating
        (
            "        names = set(params)\n        self._validate_can_fix_params(names)\n"
            "        try:\n            yield\n",
            "        names = set(params)\n        try:\n            yield\n"
            "            self._validate_can_fix_params(names)\n",
        ),
        # the validation is called on another object
        (
            "        self._validate_can_fix_params(names)\n",
            "        other._validate_can_fix_params(names)\n",
        ),
        # without @contextmanager, calling the generator function runs none of its body
        ("    @contextlib.contextmanager\n    def fix_params", "    def fix_params"),
        # the call comes before the raising one
        (
            "        with self.fix_params(constraints):\n            res = self.fit(start_params)\n",
            "        res = self.fit(start_params)\n        self._validate_can_fix_params(res)\n",
        ),
        # a base the checker did not read comes first in the MRO and may define the method
        ("class RecursiveLS(Model):", "class RecursiveLS(unknown.Mixin, Model):"),
    ],
)
def test_the_error_stays_when_the_code_does_not_show_an_earlier_call_always_raises(
    tmp_path: Path, change: tuple[str, str]
) -> None:
    source = MODELS.replace(*change)
    assert source != MODELS
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.ERROR


def test_a_raise_that_is_the_call_itself_is_not_before_it(tmp_path: Path) -> None:
    # The rejected call is the context manager: nothing it does runs before it binds.
    source = MODELS.replace(
        "    def fit(self):\n        return 0\n",
        "    @contextlib.contextmanager\n    def fix_params(self):\n        yield\n",
    )
    findings = [f for f in _findings(tmp_path, source) if f.method == "fix_params"]
    (finding,) = findings
    assert finding.severity is Severity.ERROR


SPECS = """\
class TensorSpec:
    def project(self, val):
        if not self.is_in(val):
            return self._project(val)
        return val

    def is_in(self, val):
        return False

    def _project(self, val):
        return val


class NonTensor(TensorSpec):
    def _project(self):
        {body}
"""


def test_an_override_that_always_raises_makes_the_call_fail_either_way(tmp_path: Path) -> None:
    # As torchrl 0.14.1's NonTensor._project ("Cannot project a NonTensor spec.").
    body = 'raise NotImplementedError("Cannot project a NonTensor spec.")'
    (finding,) = _findings(tmp_path, SPECS.format(body=body))
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.untyped == (
        "NonTensor._project() raises NotImplementedError whenever it is called (m.py:16): the "
        "call fails either way"
    )
    (kept,) = _findings(tmp_path, SPECS.format(body="return None"))
    assert kept.severity is Severity.ERROR


def test_a_handler_of_the_overrides_own_exception_keeps_the_error(tmp_path: Path) -> None:
    body = 'raise NotImplementedError("Cannot project a NonTensor spec.")'
    fallback = SPECS.format(body=body).replace(
        "            return self._project(val)\n",
        "            try:\n                return self._project(val)\n"
        "            except NotImplementedError:\n                return val\n",
    )
    (finding,) = _findings(tmp_path, fallback)
    assert finding.severity is Severity.ERROR


def test_what_a_method_raises_does_not_depend_on_the_depth_it_was_first_reached_at(
    tmp_path: Path,
) -> None:
    # m0 calls m1 first, ... m5 calls m6 first, and m6 raises: from m0 the chain is past the
    # depth followed, from m5 it is not; asking about m0 first must not change m5's answer.
    methods = "".join(f"    def m{i}(self):\n        self.m{i + 1}()\n" for i in range(6))
    source = f"class C:\n{methods}    def m6(self):\n        raise ValueError\n"
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    found, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    project = Project((f, summarize(Path(f.path).read_bytes())) for f in found)
    (cls,) = project.classes
    tree = ast.parse(source)
    raisers = Raisers(project, lambda _path: tree)
    assert raisers.raised(cls, "m0") is None  # past the depth followed
    assert Raisers(project, lambda _path: tree).raised(cls, "m5") == raisers.raised(cls, "m5")
    assert raisers.raised(cls, "m5") is not None
