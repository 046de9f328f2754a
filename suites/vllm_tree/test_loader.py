"""The loader: the tree's files only (never an installed vllm, never a package ``__init__`` it
was not asked to run), provided modules, automatic stubs for the rest, and ``sys.modules`` put
back as it was."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from harness.vllm_tree.loader import TreeLoader
from harness.vllm_tree.stubbing import StubModule
from harness.vllm_tree.tree import VllmTree
from suites.vllm_tree.conftest import write_tree

READS_A_STUB = """\
import vllm.envs as envs
from vllm.model_executor.layers import SomeLayer

from .worker import block_table  # a relative import of a real module


class Layer(SomeLayer):  # subclassing a stub works
    pass


def read_env():
    return envs.FLAG
"""
FILES = {
    "vllm/__init__.py": "raise ImportError('a package __init__ was run')\n",
    "vllm/v1/__init__.py": "raise ImportError('a package __init__ was run')\n",
    "vllm/v1/reads_a_stub.py": READS_A_STUB,
    "vllm/v1/worker/block_table.py": "class BlockTable:\n    pass\n",
}


def _tree(tmp_path: Path) -> VllmTree:
    return write_tree(tmp_path / "tree", FILES)


def _loader(tree: VllmTree, *real: str) -> TreeLoader:
    envs = StubModule("vllm.envs", {"FLAG": False})
    return TreeLoader(tree.root, frozenset(real).__contains__, {"vllm.envs": envs})


def test_real_modules_run_from_the_trees_files_and_the_rest_is_stubbed(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    with _loader(tree, "vllm.v1.reads_a_stub", "vllm.v1.worker.block_table") as loader:
        module = loader.load("vllm.v1.reads_a_stub")
        assert module.__file__ == str(tree.root / "vllm/v1/reads_a_stub.py")
        assert module.block_table.BlockTable.__module__ == "vllm.v1.worker.block_table"
        assert issubclass(module.Layer, module.SomeLayer)
        assert module.read_env() is False  # a provided value
        assert loader.load("vllm").__name__ == "vllm"  # vllm/__init__.py never ran
        assert isinstance(loader.load("vllm.anything.at.all"), StubModule)


def test_sys_modules_are_restored_and_an_installed_vllm_is_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = tmp_path / "site-packages"
    (installed / "vllm").mkdir(parents=True)
    (installed / "vllm" / "__init__.py").write_text("raise ImportError('TRIPWIRE')\n")
    monkeypatch.syspath_prepend(str(installed))
    sentinel = types.ModuleType("vllm")
    monkeypatch.setitem(sys.modules, "vllm", sentinel)  # something already imported as vllm
    tree = _tree(tmp_path)
    with _loader(tree, "vllm.v1.worker.block_table") as loader:
        assert "vllm" not in sys.modules  # set aside on entry
        loader.load("vllm.v1.worker.block_table")
        files = [getattr(m, "__file__", None) for n, m in sys.modules.items() if n[:4] == "vllm"]
        assert all(f is None or f.startswith(str(tree.root)) for f in files)
    assert sys.modules["vllm"] is sentinel
    assert not [n for n in sys.modules if n.startswith("vllm.")]
    del sys.modules["vllm"]
    with pytest.raises(ImportError, match="TRIPWIRE"):  # outside, the real path is untouched
        __import__("vllm")


def test_a_real_module_the_tree_lacks_is_an_import_error(tmp_path: Path) -> None:
    missing = "vllm.v1.attention.ops.flashmla"
    with _loader(_tree(tmp_path), missing) as loader, pytest.raises(ModuleNotFoundError):
        loader.load(missing)


def test_a_missing_third_party_package_is_stubbed_only_for_the_trees_code(
    tmp_path: Path,
) -> None:
    files = {"vllm/v1/uses_missing.py": "import not_an_installed_package_xyz\nVALUE = 1\n"}
    tree = write_tree(tmp_path, files)
    with _loader(tree, "vllm.v1.uses_missing") as loader:
        assert loader.load("vllm.v1.uses_missing").VALUE == 1
        assert "not_an_installed_package_xyz" in loader.stubbed_third_party
        with pytest.raises(ModuleNotFoundError):
            __import__("another_missing_package_xyz")  # our own imports still fail
    assert "not_an_installed_package_xyz" not in sys.modules


def test_load_outside_the_block_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="outside its with-block"):
        _loader(_tree(tmp_path)).load("vllm.v1.reads_a_stub")


def test_a_module_runs_as_python_would_decode_it(tmp_path: Path) -> None:
    source = b"# -*- coding: latin-1 -*-\nNAME = '\xe9'\n"
    tree = write_tree(tmp_path, {})
    (tree.root / "vllm" / "v1" / "latin.py").write_bytes(source)
    with _loader(tree, "vllm.v1.latin") as loader:
        assert loader.load("vllm.v1.latin").NAME == "é"
