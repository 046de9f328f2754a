"""resolve: imports to classes across modules, C3 MRO, cycles and inconsistent orders."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.overrides.discover import discover
from harness.overrides.model.resolve import Project
from harness.overrides.summary import summarize


def project(tmp_path: Path, files: dict[str, str]) -> Project:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    found, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    return Project((f, summarize(Path(f.path).read_bytes())) for f in found)


def mro(p: Project, key: str) -> list[str]:
    (cls,) = [c for c in p.classes if c.key == key]
    return [c.qualname for c in p.mro(cls)]


def test_imports_of_every_shape(tmp_path: Path) -> None:
    p = project(
        tmp_path,
        {
            "pkg/__init__.py": "from .base import Base as Exported\n",
            "pkg/base.py": "class Base:\n    class Inner: ...\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/a.py": "from ..base import Base\nclass A(Base): ...\n",
            "pkg/sub/b.py": "import pkg.base\nclass B(pkg.base.Base): ...\n",
            "pkg/sub/c.py": "from pkg import base as m\nclass C(m.Base.Inner): ...\n",
            "pkg/sub/d.py": "from pkg import Exported\nAlias = Exported\nclass D(Alias[int]): ...\n",
            "pkg/sub/e.py": "from pkg.base import *\nclass E(Base, typing.Generic[T]): ...\n",
            "pkg/sub/f.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.a import A\nclass F(A): ...\n",
        },
    )
    assert mro(p, "pkg.sub.a.A") == ["A", "Base"]
    assert mro(p, "pkg.sub.b.B") == ["B", "Base"]
    assert mro(p, "pkg.sub.c.C") == ["C", "Base.Inner"]
    assert mro(p, "pkg.sub.d.D") == ["D", "Base"]
    assert mro(p, "pkg.sub.e.E") == ["E", "Base"]
    assert mro(p, "pkg.sub.f.F") == ["F", "A", "Base"]
    (e,) = [c for c in p.classes if c.key == "pkg.sub.e.E"]
    assert e.unresolved_bases  # typing.Generic is outside the tree: skipped, not reported
    assert p.problems == []


def test_c3_diamond(tmp_path: Path) -> None:
    p = project(
        tmp_path, {"m.py": "class O: ...\nclass A(O): ...\nclass B(O): ...\nclass C(A, B): ...\n"}
    )
    assert mro(p, "m.C") == ["C", "A", "B", "O"]


def test_cycles_and_inconsistent_mro(tmp_path: Path) -> None:
    p = project(
        tmp_path,
        {
            "self_.py": "class S(S): ...\n",
            "x.py": "from y import Y\nclass X(Y): ...\n",
            "y.py": "from x import X\nclass Y(X): ...\n",
            "bad.py": "class A: ...\nclass B(A): ...\nclass C(A, B): ...\n",
        },
    )
    problems = sorted((pr.cls.key, type(pr).__name__) for pr in p.problems)
    assert problems == [
        ("bad.C", "NoLinearization"),
        ("self_.S", "InheritanceCycle"),
        ("x.X", "InheritanceCycle"),
        ("y.Y", "InheritanceCycle"),
    ]
    assert mro(p, "bad.C") == ["C"]


def test_redefining_an_imported_name_is_not_self_inheritance(tmp_path: Path) -> None:
    # vLLM's llama_eagle.py: `from ...llama import LlamaDecoderLayer` then
    # `class LlamaDecoderLayer(LlamaDecoderLayer)`.
    p = project(
        tmp_path,
        {
            "llama.py": "class LlamaDecoderLayer: ...\n",
            "eagle.py": "from llama import LlamaDecoderLayer\nclass LlamaDecoderLayer(LlamaDecoderLayer): ...\n",
            "again.py": "class A: ...\nclass A(A): ...\n",
        },
    )
    assert p.problems == []
    assert mro(p, "eagle.LlamaDecoderLayer") == ["LlamaDecoderLayer", "LlamaDecoderLayer"]
    assert mro(p, "again.A@2") == ["A", "A"]


def test_definer_and_descendants(tmp_path: Path) -> None:
    p = project(
        tmp_path,
        {
            "m.py": "class A:\n    def f(self): ...\nclass B(A): ...\nclass C(B):\n    def f(self): ...\n"
        },
    )
    a, b, c = p.classes
    assert p.definer(c, "f") is c
    assert p.definer(c, "f", after=c) is a
    assert p.definer(b, "f") is a
    assert {d.key for d in p.descendants(a)} == {"m.B", "m.C"}


def test_relative_import_inside_a_namespace_package(tmp_path: Path) -> None:
    # Two namespace directories each with a `base.py`: `.base` must mean the sibling.
    p = project(
        tmp_path,
        {
            "a/base.py": "class Base: ...\n",
            "a/impl.py": "from .base import Base\nclass Impl(Base): ...\n",
            "b/base.py": "class Base: ...\n",
            "b/impl.py": "from .base import Base\nclass Impl(Base): ...\n",
        },
    )
    (b_impl,) = [c for c in p.classes if c.key == "b.impl.Impl"]
    assert [c.key for c in p.mro(b_impl)] == ["b.impl.Impl", "b.base.Base"]


def test_a_project_is_freed_by_reference_counting_alone(tmp_path: Path) -> None:
    # No reference cycle (a class refers to its module weakly): dropping the project frees
    # every module and class at once, with the cyclic collector switched off.
    import gc
    import weakref

    files = {
        "base.py": "class Base:\n    class Inner: ...\n    def f(self): ...\n",
        "app.py": "from base import Base\nclass A(Base):\n    class Inner(Base.Inner): ...\n",
        "more.py": "from app import A\nclass B(A): ...\nclass C(B, A): ...\n",
    }
    p = project(tmp_path, files)
    by_key = {c.key: c for c in p.classes}
    assert p.definer(by_key["more.C"], "f") is by_key["base.Base"]
    assert by_key["base.Base"].module is p.modules["base"]
    del by_key
    refs = [weakref.ref(o) for o in (p, *p.files, *p.classes)]
    gc.disable()
    try:
        del p
        assert [r() for r in refs if r() is not None] == []
    finally:
        gc.enable()


def test_a_class_kept_past_its_project_says_so(tmp_path: Path) -> None:
    cls = project(tmp_path, {"a.py": "class A: ...\n"}).classes[0]
    with pytest.raises(RuntimeError, match=r"a\.A: its project was freed"):
        _ = cls.module


def test_a_decorator_a_stub_aliases_to_property_makes_a_property(tmp_path: Path) -> None:
    # pandas: `cache_readonly = property` in _libs/properties.pyi, re-exported by a module.
    from harness.overrides.checker import CheckOptions, check

    files = {
        "pkg/__init__.py": "",
        "pkg/props.pyi": "cache_readonly = property\n",
        "pkg/deco.py": "from pkg.props import cache_readonly\n",
        "pkg/m.py": (
            "from pkg.deco import cache_readonly\n"
            "class Base:\n    @property\n    def ctor(self):\n        return list\n\n"
            "    def make(self, x):\n        return self.ctor(x)\n\n"
            "class Sub(Base):\n    @cache_readonly\n    def ctor(self):\n        return tuple\n"
        ),
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    options = CheckOptions(cache_dir=None, cwd=str(tmp_path))
    assert check([str(tmp_path / "pkg")], options=options).findings == []


def test_a_base_bound_in_branches_records_its_alternatives(tmp_path: Path) -> None:
    p = project(
        tmp_path,
        {
            "jax_trainer.py": "class JaxTrainer: ...\n",
            "torch_trainer.py": "class TorchTrainer: ...\n",
            "m.py": (
                "import os\n"
                "if os.environ.get('BACKEND') == 'jax':\n"
                "    from jax_trainer import JaxTrainer as Trainer\n"
                "else:\n"
                "    from torch_trainer import TorchTrainer as Trainer\n"
                "class Model(Trainer): ...\n"
                "from torch_trainer import TorchTrainer\n"
                "class Plain(TorchTrainer): ...\n"
            ),
        },
    )
    by_key = {c.key: c for c in p.classes}
    ((read, written, lines),) = by_key["m.Model"].alternatives
    assert (read.qualname, written, lines) == ("TorchTrainer", "Trainer", (3, 5))
    assert by_key["m.Plain"].alternatives == []
