"""The loader: the tree's files only (never an installed vllm), nothing written, stubs refused
once the tree is driven, missing third-party packages stubbed for the tree's code alone."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from harness.adapter.jobs import list_job
from harness.adapter.platform import PlatformOptions
from harness.adapter.session import open_tree
from harness.adapter.stubbing import LEDGER, StubUsed, make_stub_class
from harness.adapter.tree import VllmTree
from suites.adapter.conftest import ERA034, copy_tree


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_an_installed_vllm_is_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, era034: VllmTree
) -> None:
    installed = tmp_path / "site-packages"
    (installed / "vllm" / "v1").mkdir(parents=True)
    (installed / "vllm" / "__init__.py").write_text("raise ImportError('site-packages vllm')\n")
    (installed / "vllm" / "v1" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(installed))
    with open_tree(era034, PlatformOptions()) as session:
        session.module("vllm.v1.attention.backends.toy")
        files = {
            name: getattr(module, "__file__", None)
            for name, module in sys.modules.items()
            if name.split(".")[0] == "vllm"
        }
    real = [f for f in files.values() if f is not None]
    assert real and all(f.startswith(str(era034.root)) for f in real)
    assert "vllm" not in sys.modules or not str(
        getattr(sys.modules["vllm"], "__file__", "")
    ).startswith(str(installed))


def test_the_tree_is_left_byte_for_byte_as_it_was(tmp_path: Path) -> None:
    tree = copy_tree(ERA034, tmp_path)
    before = _digest(tree.root)
    rows = list_job(tree, PlatformOptions(), None, 6, 0)
    assert [r["status"] for r in rows] == ["runs", "runs", "stops"]
    assert _digest(tree.root) == before


def test_modules_leave_sys_modules_with_the_session(era034: VllmTree) -> None:
    before = {n for n in sys.modules if n.split(".")[0] == "vllm"}
    with open_tree(era034, PlatformOptions()) as session:
        session.module("vllm.v1.attention.backends.toy")
    assert {n for n in sys.modules if n.split(".")[0] == "vllm"} == before


def test_a_stub_is_refused_once_strict_and_named() -> None:
    stub = make_stub_class("vllm._custom_ops.get_scheduler_metadata")
    assert stub(print) is print  # import time: a stubbed decorator leaves its target alone
    LEDGER.strict()
    try:
        with pytest.raises(
            StubUsed, match=r"called vllm\._custom_ops\.get_scheduler_metadata, which"
        ):
            stub(3)
        with pytest.raises(StubUsed, match="tested the truth of"):
            bool(stub)
    finally:
        LEDGER.is_strict = False


def test_a_missing_third_party_package_is_stubbed_only_for_the_trees_code(
    tmp_path: Path,
) -> None:
    tree = copy_tree(ERA034, tmp_path)
    module = tree.root / "vllm" / "utils" / "uses_missing.py"
    module.write_text("import not_an_installed_package_xyz\nVALUE = 1\n")
    with open_tree(tree, PlatformOptions()) as session:
        assert session.module("vllm.utils.uses_missing").VALUE == 1
        assert "not_an_installed_package_xyz" in session.loader.stubbed_third_party
        with pytest.raises(ModuleNotFoundError):
            __import__("another_missing_package_xyz")  # our own imports still fail


def test_a_module_of_the_attention_path_the_tree_lacks_is_an_import_error(
    era034: VllmTree,
) -> None:
    with open_tree(era034, PlatformOptions()) as session, pytest.raises(ModuleNotFoundError):
        session.module("vllm.v1.attention.ops.flashmla")
