"""evidence: which calls prove a crash (error), which only suggest one (warning)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.overrides.checker import CheckOptions, check
from harness.overrides.discover import discover
from harness.overrides.evidence import proofs
from harness.overrides.evidence.proofs import EvidenceIndex
from harness.overrides.findings import Finding, Severity
from harness.overrides.model.resolve import Project
from harness.overrides.summary import summarize

BASE = """\
class Base:
    def f(self, a, b):
        return a, b

    def run(self):
        return self.f(1, b=2)
"""


def findings(tmp_path: Path, files: dict[str, str]) -> list[Finding]:
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    return check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path))).findings


def only(found: list[Finding]) -> Finding:
    assert len(found) == 1, found
    return found[0]


def test_self_call_in_an_inherited_method_is_an_error(tmp_path: Path) -> None:
    f = only(
        findings(
            tmp_path,
            {
                "base.py": BASE,
                "sub.py": "from base import Base\nclass Sub(Base):\n    def f(self, a, bb): ...\n",
            },
        )
    )
    assert f.severity is Severity.ERROR and f.code == "HO101"
    assert f.evidence is not None
    assert (f.evidence.path, f.evidence.line, f.evidence.text) == (
        "base.py",
        6,
        "return self.f(1, b=2)",
    )
    assert f.evidence.error == "TypeError: Sub.f() got an unexpected keyword argument 'b'"


def test_no_evidence_when_the_subclass_overrides_the_caller_too(tmp_path: Path) -> None:
    sub = "from base import Base\nclass Sub(Base):\n    def f(self, a, bb): ...\n    def run(self): return self.f(1, bb=2)\n"
    f = only(findings(tmp_path, {"base.py": BASE, "sub.py": sub}))
    assert f.severity is Severity.WARNING and f.evidence is None


def test_a_grandchild_inheriting_the_override_is_covered(tmp_path: Path) -> None:
    sub = "from base import Base\nclass Sub(Base):\n    def f(self, a, bb): ...\nclass Leaf(Sub): ...\n"
    f = only(findings(tmp_path, {"base.py": BASE, "sub.py": sub}))
    assert f.severity is Severity.ERROR


def test_super_call_from_a_subclass(tmp_path: Path) -> None:
    base = "class Base:\n    def f(self, a, b): ...\n"
    sub = (
        "from base import Base\n"
        "class Mid(Base):\n    def f(self, a, bb): ...\n"
        "class Leaf(Mid):\n    def f(self, a, b):\n        return super().f(a, b=b)\n"
    )
    found = findings(tmp_path, {"base.py": base, "sub.py": sub})
    mid = [f for f in found if f.class_name == "sub.Mid"]
    assert [(f.code, f.severity) for f in mid] == [("HO101", Severity.ERROR)]
    assert mid[0].evidence is not None and mid[0].evidence.receiver == "super()"


def test_constructed_receiver_is_an_error_annotated_is_a_warning(tmp_path: Path) -> None:
    base = "class Base:\n    def f(self, a, b): ...\n"
    sub = "from base import Base\nclass Sub(Base):\n    def f(self, a, bb): ...\n"
    use_constructed = "from sub import Sub\ndef main():\n    s = Sub()\n    s.f(1, b=2)\n"
    f = only(findings(tmp_path, {"base.py": base, "sub.py": sub, "main.py": use_constructed}))
    assert f.severity is Severity.ERROR and f.evidence is not None
    assert f.evidence.receiver == "constructed"

    use_annotated = "from base import Base\ndef main(x: Base):\n    x.f(1, b=2)\n"
    (tmp_path / "main.py").write_text(use_annotated)
    f = only(
        check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path))).findings
    )
    assert f.severity is Severity.WARNING and f.evidence is not None
    assert f.evidence.receiver == "annotated" and f.evidence.line == 3


def test_a_call_the_override_accepts_is_no_evidence(tmp_path: Path) -> None:
    base = "class Base:\n    def f(self, a, b): ...\n    def run(self): return self.f(1, 2)\n"
    sub = "from base import Base\nclass Sub(Base):\n    def f(self, a, bb): ...\n"
    f = only(findings(tmp_path, {"base.py": base, "sub.py": sub}))
    assert f.severity is Severity.WARNING and f.evidence is None


def test_one_finding_per_call_lists_every_difference(tmp_path: Path) -> None:
    base = (
        "class Base:\n    def f(self, a, b, c=1): ...\n    def run(self): return self.f(1, b=2)\n"
    )
    sub = "from base import Base\nclass Sub(Base):\n    def f(self, a, bb, c): ...\n"
    f = only(findings(tmp_path, {"base.py": base, "sub.py": sub}))
    assert (f.code, f.severity) == ("HO101", Severity.ERROR)  # the difference the call hits
    assert [(d.code, d.params) for d in f.differences] == [
        ("HO101", ("b", "bb")),
        ("HO106", ("c",)),
    ]
    assert f.params == ("b", "bb", "c")
    assert "removes the default of parameter 'c'" in f.message
    assert f.message.endswith("raises TypeError: Sub.f() got an unexpected keyword argument 'b'")


def test_a_positional_call_to_a_re_signed_method_is_one_finding(tmp_path: Path) -> None:
    """vLLM 0.33.0 gave six errors for one call to a re-signed ``multiply`` (issue 12)."""
    base = (
        "class Op:\n    def multiply(self, x, y, z, w, out=None): ...\n"
        "    def run(self): return self.multiply(1, 2, 3, 4, None)\n"
    )
    sub = "from base import Op\nclass Mine(Op):\n    def multiply(self, a, b, /, *, c): ...\n"
    f = only(findings(tmp_path, {"base.py": base, "sub.py": sub}))
    assert f.severity is Severity.ERROR and len(f.differences) >= 4
    assert f.evidence is not None
    assert f.evidence.error == (
        "TypeError: Mine.multiply() takes 3 positional arguments but 6 were given"
    )


def test_each_call_site_is_its_own_finding(tmp_path: Path) -> None:
    base = BASE + "    def again(self):\n        return self.f(a=1, b=2)\n"
    sub = "from base import Base\nclass Sub(Base):\n    def f(self, a, bb): ...\n"
    found = findings(tmp_path, {"base.py": base, "sub.py": sub})
    assert [(f.severity, f.evidence and f.evidence.line) for f in found] == [
        (Severity.ERROR, 6),
        (Severity.ERROR, 8),
    ]


def test_instance_attribute_shadowing_the_method_is_no_proof(tmp_path: Path) -> None:
    base = (
        "class Base:\n"
        "    def __init__(self):\n        self.f = make_f()\n"
        "    def f(self, a, b): ...\n"
        "    def run(self): return self.f(1, b=2)\n"
    )
    sub = "from base import Base\nclass Sub(Base):\n    def f(self, a, bb): ...\n"
    f = only(findings(tmp_path, {"base.py": base, "sub.py": sub}))
    assert f.severity is Severity.WARNING and f.evidence is None


def test_cls_receiver_in_a_class_method(tmp_path: Path) -> None:
    base = (
        "class Platform:\n"
        "    @classmethod\n    def is_fully_connected(cls, device_ids): ...\n"
        "    def inst(self, a): ...\n"
        "    @classmethod\n    def check(cls):\n"
        "        cls.inst(None, a=1)\n"
        "        return cls.is_fully_connected(device_ids=[0])\n"
    )
    sub = (
        "from base import Platform\nclass Cuda(Platform):\n"
        "    @classmethod\n    def is_fully_connected(cls, physical_device_ids): ...\n"
        "    def inst(self, b): ...\n"
    )
    found = {f.method: f for f in findings(tmp_path, {"base.py": base, "sub.py": sub})}
    proven = found["is_fully_connected"]
    assert proven.severity is Severity.ERROR and proven.evidence is not None
    assert proven.evidence.receiver == "self"  # the implicit first argument
    assert proven.evidence.error.endswith("got an unexpected keyword argument 'device_ids'")
    # `cls.inst(None, a=1)` passes the instance explicitly: not a bound call, no proof.
    assert found["inst"].severity is Severity.WARNING and found["inst"].evidence is None


def test_a_wrapper_that_pops_a_keyword_never_passes_it_to_the_override(tmp_path: Path) -> None:
    base = (
        "def consume(fn):\n"
        "    def wrap(*args, **kwargs):\n"
        "        kwargs.pop('decorate', None)\n"
        "        return fn(*args, **kwargs)\n"
        "    return wrap\n\n"
        "class Base:\n"
        "    def f(self, x, decorate=False): ...\n\n"
        "    def run(self):\n        return self.f(1, decorate=True)\n"
    )
    popped = (
        "from base import Base, consume\nclass Sub(Base):\n    @consume\n    def f(self, x): ...\n"
    )
    assert all(
        f.severity is Severity.WARNING
        for f in findings(tmp_path, {"base.py": base, "sub.py": popped})
    )
    plain = base.replace("kwargs.pop('decorate', None)", "print(kwargs)")
    found = findings(tmp_path, {"base.py": plain, "sub.py": popped})
    assert [f.severity for f in found] == [Severity.ERROR]


CAUGHT = """\
class Base:
    def get_offset(self, bbox, renderer): ...

    def extent(self):
        {wrap}
            px = self.get_offset(1, 2)
        {handler}
            px = self.get_offset()
        return px


class Sub(Base):
    def get_offset(self): ...
"""


def test_a_call_whose_type_error_is_handled_is_no_error(tmp_path: Path) -> None:
    f = only(findings(tmp_path, {"m.py": CAUGHT.format(wrap="try:", handler="except TypeError:")}))
    assert f.severity is Severity.WARNING and f.evidence is not None
    assert (
        f.evidence.unreached
        == "the TypeError is handled where it is raised (except TypeError: at line 5)"
    )
    for handler in ("except KeyError:", "except Exception:", "except:"):
        # A catch-all only reports the crash (threading runs self.run() under one).
        other = CAUGHT.format(wrap="try:", handler=handler)
        assert only(findings(tmp_path, {"m.py": other})).severity is Severity.ERROR, handler


def test_a_call_expected_to_raise_in_a_test_is_no_error(tmp_path: Path) -> None:
    test = (
        "import pytest\nfrom m import Sub\n\ndef test_it():\n"
        "    s = Sub()\n    with pytest.raises(TypeError):\n        s.get_offset(1, 2)\n"
    )
    source = "class Base:\n    def get_offset(self, bbox, renderer): ...\n\nclass Sub(Base):\n    def get_offset(self): ...\n"
    f = only(findings(tmp_path, {"m.py": source, "test_m.py": test}))
    assert f.severity is Severity.WARNING and f.evidence is not None
    assert f.evidence.unreached is not None and "pytest.raises(TypeError)" in f.evidence.unreached


POPPED = """\
class Power:
    def power(self, *args, **kwds):
        raise NotImplementedError

    def _power_identity(self, *args, **kwds):
        power_ = kwds.pop("power")
        return self.power(*args, **kwds) - power_

    def solve(self, effect_size, nobs):
        return self._power_identity(effect_size=effect_size, nobs=nobs, power=0.8)


class FTestPower(Power):
    def power(self, effect_size, nobs, alpha=0.05):
        return effect_size
"""


def test_a_forwarding_method_that_pops_a_keyword_does_not_pass_it_on(tmp_path: Path) -> None:
    # As statsmodels 0.15.0's Power._power_identity and FTestAnovaPower.power.
    assert findings(tmp_path, {"m.py": POPPED}) == []
    kept = POPPED.replace('power_ = kwds.pop("power")', 'power_ = kwds.get("power")')
    f = only(findings(tmp_path, {"m.py": kept}))
    assert f.severity is Severity.ERROR and f.evidence is not None
    assert f.evidence.error == (
        "TypeError: FTestPower.power() got an unexpected keyword argument 'power'"
    )


def test_a_call_reached_through_a_base_picked_by_a_branch_is_a_warning(tmp_path: Path) -> None:
    # As keras 3.15.1's trainer_test.py, whose Trainer is one of five backends' trainers.
    files = {
        "jax_trainer.py": BASE.replace("Base", "JaxTrainer").replace("a, b", "s, a, b"),
        "torch_trainer.py": BASE.replace("Base", "TorchTrainer"),
        "m.py": (
            "import os\n"
            "if os.environ.get('BACKEND') == 'jax':\n"
            "    from jax_trainer import JaxTrainer as Trainer\n"
            "else:\n"
            "    from torch_trainer import TorchTrainer as Trainer\n"
            "class JaxModel(Trainer):\n"
            "    def f(self, s, a, b):\n"
            "        return a\n"
        ),
    }
    finding = only([f for f in findings(tmp_path, files) if f.path == "m.py"])
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.untyped == (
        "JaxModel derives from Trainer, which m.py binds at lines 3, 5 before it, not always "
        "to TorchTrainer, the class the call is reached through"
    )
    files["m.py"] = files["m.py"].replace(
        "    from jax_trainer import JaxTrainer as Trainer\n", "    pass\n"
    )
    finding = only([f for f in findings(tmp_path, files) if f.path == "m.py"])
    assert finding.severity is Severity.ERROR


def test_the_first_names_asked_are_found_by_a_scan_and_the_rest_by_the_index_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        calls = "".join(f"        self.m{k}({i})\n" for k in range(24))
        (tmp_path / f"mod{i}.py").write_text(f"class C{i}:\n    def run(self):\n{calls}")
    files, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    project = Project([(f, summarize(Path(f.path).read_bytes())) for f in files])
    names = [f"m{k}" for k in range(24)] + ["run", "absent"]
    scanned = EvidenceIndex(project)  # the first _SCANNED names by a scan, then the index
    found = {name: scanned.calls(name) for name in names}
    monkeypatch.setattr(proofs, "_SCANNED", 0)
    indexed = EvidenceIndex(project)  # every name from the index
    for name in names:
        assert [(c, k and k.key, m.file.display) for c, k, m in found[name]] == [
            (c, k and k.key, m.file.display) for c, k, m in indexed.calls(name)
        ], name
    assert len(found["m3"]) == 3 and found["absent"] == []
