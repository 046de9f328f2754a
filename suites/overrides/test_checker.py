"""checker: changed-files mode, result reuse, cache, suppressions and baseline end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.overrides import baseline
from harness.overrides.checker import CheckOptions, check

FILES = {
    "pkg/__init__.py": "",
    "pkg/common.py": (
        "class MLACommonMetadataBuilder:\n"
        "    def _build_decode(self, block_table_tensor, seq_lens): ...\n"
        "    def build(self):\n"
        "        return self._build_decode(block_table_tensor=1, seq_lens=2)\n"
    ),
    "pkg/flashmla.py": (
        "from .common import MLACommonMetadataBuilder\n"
        "class FlashMLAMetadataBuilder(MLACommonMetadataBuilder):\n"
        "    def _build_decode(self, block_table_tensor, seq_lens): ...\n"
    ),
    "pkg/rocm_aiter_mla.py": (
        "from pkg.common import MLACommonMetadataBuilder\n"
        "class AiterMLAMetadataBuilder(MLACommonMetadataBuilder):\n"
        "    def _build_decode(self, block_table, seq_lens): ...\n"
    ),
    "pkg/unrelated.py": "class A:\n    def f(self, x): ...\nclass B(A):\n    def f(self, y): ...\n",
}


def tree(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def run(
    root: Path, changed: list[str] | None = None, **kw: object
) -> list[tuple[str, int, str, str]]:
    options = CheckOptions(cwd=str(root), **kw)  # type: ignore[arg-type]
    result = check([str(root)], changed=changed, options=options)
    return [(f.path, f.line, f.code, f.severity.value) for f in result.findings]


def test_whole_tree(tmp_path: Path) -> None:
    root = tree(tmp_path)
    assert run(root, cache_dir=None) == [
        ("pkg/rocm_aiter_mla.py", 3, "HO101", "error"),
        ("pkg/unrelated.py", 4, "HO101", "warning"),
    ]


def test_changing_only_the_base_file_reports_the_stale_subclass(tmp_path: Path) -> None:
    root = tree(tmp_path)
    assert run(root, [str(root / "pkg/common.py")], cache_dir=None) == [
        ("pkg/rocm_aiter_mla.py", 3, "HO101", "error")
    ]
    assert run(root, [str(root / "pkg/flashmla.py")], cache_dir=None) == []
    assert run(root, [str(root / "pkg/unrelated.py")], cache_dir=None) == [
        ("pkg/unrelated.py", 4, "HO101", "warning")
    ]


def test_cache_and_result_reuse_follow_edits(tmp_path: Path) -> None:
    root = tree(tmp_path)
    cache = str(tmp_path / "cache")
    first = check([str(root)], options=CheckOptions(cwd=str(root), cache_dir=cache))
    assert first.stats.parsed == 5 and not first.stats.reused
    second = check([str(root)], options=CheckOptions(cwd=str(root), cache_dir=cache))
    assert second.stats.reused and second.findings == first.findings
    fixed = root / "pkg/rocm_aiter_mla.py"
    fixed.write_text(FILES["pkg/rocm_aiter_mla.py"].replace("block_table,", "block_table_tensor,"))
    third = check([str(root)], options=CheckOptions(cwd=str(root), cache_dir=cache))
    assert third.stats.parsed == 1 and not third.stats.reused
    assert [f.code for f in third.findings] == ["HO101"]  # only pkg/unrelated.py is left


def test_inline_ignores(tmp_path: Path) -> None:
    root = tree(tmp_path)
    path = root / "pkg/unrelated.py"
    path.write_text(
        path.read_text().replace(
            "def f(self, y): ...", "def f(self, y): ...  # harness: ignore[HO101]"
        )
    )
    (root / "pkg/extra.py").write_text(
        "class C:\n    def f(self): ...  # harness: ignore[HO104]\n    def g(self): ...  # harness: ignore\n"
    )
    assert run(root, cache_dir=None) == [
        ("pkg/extra.py", 2, "HO301", "warning"),
        ("pkg/extra.py", 3, "HO302", "warning"),
        ("pkg/rocm_aiter_mla.py", 3, "HO101", "error"),
    ]


def test_baseline_hides_known_drift_only(tmp_path: Path) -> None:
    root = tree(tmp_path)
    options = CheckOptions(cwd=str(root), cache_dir=None)
    known = check([str(root)], options=options).findings
    path = tmp_path / "baseline.json"
    baseline.write(path, known)
    with_baseline = CheckOptions(cwd=str(root), cache_dir=None, baseline=str(path))
    assert check([str(root)], options=with_baseline).findings == []
    # Same class, same method, another parameter renamed: a new finding.
    unrelated = root / "pkg/unrelated.py"
    unrelated.write_text(
        "class A:\n    def f(self, x, z): ...\nclass B(A):\n    def f(self, x, zz): ...\n"
    )
    new = check([str(root)], options=with_baseline).findings
    assert [(f.code, f.params) for f in new] == [("HO303", ()), ("HO101", ("z", "zz"))]
    assert new[0].path == "baseline.json"  # the old entry for (x, y) is stale


def test_optional_rules(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "from typing import override\n"
        "class A:\n    def f(self): ...\n"
        "class B(A):\n    def f(self): ...\n    @override\n    def g(self): ...\n"
    )
    assert run(tmp_path, cache_dir=None) == []
    assert run(tmp_path, cache_dir=None, select=frozenset({"HO201", "HO202"})) == [
        ("m.py", 5, "HO201", "warning"),
        ("m.py", 7, "HO202", "warning"),
    ]


def test_async_generator_may_override_a_def_returning_an_async_generator(tmp_path: Path) -> None:
    # vLLM's EngineClient.generate is a plain def; AsyncLLM.generate is an async generator.
    (tmp_path / "m.py").write_text(
        "class EngineClient:\n    def generate(self, prompt): ...\n    async def stop(self): ...\n"
        "class AsyncLLM(EngineClient):\n    async def generate(self, prompt):\n        yield prompt\n"
        "    def stop(self): ...\n"
    )
    assert run(tmp_path, cache_dir=None) == [("m.py", 7, "HO110", "warning")]


def test_same_named_base_is_qualified_in_the_message(tmp_path: Path) -> None:
    (tmp_path / "v0.py").write_text(
        "class Executor:\n    def execute_model(self, execute_model_req): ...\n"
    )
    (tmp_path / "v1.py").write_text(
        "from v0 import Executor as ExecutorV0\n"
        "class Executor(ExecutorV0):\n    def execute_model(self, scheduler_output): ...\n"
    )
    (finding,) = check(
        [str(tmp_path)], options=CheckOptions(cwd=str(tmp_path), cache_dir=None)
    ).findings
    assert finding.message.startswith(
        "v1.Executor.execute_model() renames parameter 'execute_model_req' of v0.Executor"
    )


# What is found never depends on symlinks, on how changed paths are given, or on deletions.

PKG = {
    "pkg/__init__.py": "",
    "pkg/base.py": (
        "class Builder:\n"
        "    def build(self, block_table_tensor, seq_lens): ...\n"
        "    def run(self):\n"
        "        return self.build(block_table_tensor=1, seq_lens=2)\n"
    ),
    "pkg/sub.py": (
        "from pkg.base import Builder\n"
        "class Sub(Builder):\n"
        "    def build(self, block_table, seq_lens): ...\n"
    ),
}
PKG_CRASH = [("pkg/sub.py", 3, "HO101", "error")]


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_symlinked_module_neither_hides_nor_doubles(tmp_path: Path) -> None:
    root = _tree(tmp_path, PKG)
    (root / "docs" / "examples").mkdir(parents=True)
    (root / "docs" / "examples" / "base.py").symlink_to("../../pkg/base.py")
    assert run(root, cache_dir=None) == PKG_CRASH
    assert run(root, [str(root / "docs/examples/base.py")], cache_dir=None) == PKG_CRASH


def test_symlinked_package_neither_hides_nor_doubles(tmp_path: Path) -> None:
    root = _tree(tmp_path, PKG)
    (root / "aaa").symlink_to("pkg", target_is_directory=True)  # walked before pkg/ by name
    assert run(root, cache_dir=None) == PKG_CRASH
    assert run(root, [str(root / "aaa" / "base.py")], cache_dir=None) == PKG_CRASH


def test_imports_through_a_symlinked_package_resolve(tmp_path: Path) -> None:
    """``aaa -> pkg``, walked after ``pkg/``: ``aaa.base`` names ``pkg/base.py`` too."""
    app = "from aaa.base import Builder\nclass App(Builder):\n    def build(self, block_table, seq_lens): ...\n"
    root = _tree(tmp_path, {**PKG, "zzz/app.py": app})
    (root / "aaa").symlink_to("pkg", target_is_directory=True)
    want = [*PKG_CRASH, ("zzz/app.py", 3, "HO101", "error")]
    assert run(root, cache_dir=None) == want
    assert run(root, [str(root / "aaa" / "base.py")], cache_dir=None) == want


def test_changed_directory_means_every_file_under_it(tmp_path: Path) -> None:
    files = {
        "lib/__init__.py": "",
        "lib/base.py": PKG["pkg/base.py"],
        "app/sub.py": PKG["pkg/sub.py"].replace("pkg.base", "lib.base"),
    }
    root = _tree(tmp_path, files)
    assert run(root, [str(root / "lib")], cache_dir=None) == [("app/sub.py", 3, "HO101", "error")]
    assert run(root, [str(root / "app")], cache_dir=None) == [("app/sub.py", 3, "HO101", "error")]


def test_deleted_changed_module_replaced_by_a_package(tmp_path: Path) -> None:
    """``pkg/base.py`` became ``pkg/base/__init__.py``; only the deletion is passed."""
    root = _tree(tmp_path, PKG)
    (root / "pkg" / "base.py").unlink()
    _tree(root, {"pkg/base/__init__.py": PKG["pkg/base.py"]})
    deleted = str(root / "pkg" / "base.py")
    assert run(root, [deleted], cache_dir=None) == PKG_CRASH
    assert run(root, [deleted, str(root / "pkg" / "gone")], cache_dir=None) == PKG_CRASH


def test_deleted_changed_module_behind_a_star_import(tmp_path: Path) -> None:
    """The subclass's base now resolves, through ``pkg``'s star imports, to another module."""
    files = {
        "pkg/__init__.py": "from .fast import *\nfrom .slow import *\n",
        "pkg/slow.py": PKG["pkg/base.py"],
        "app.py": "from pkg import Builder\nclass Sub(Builder):\n    def build(self, block_table, seq_lens): ...\n",
    }
    root = _tree(tmp_path, files)
    assert run(root, [str(root / "pkg" / "fast.py")], cache_dir=None) == [
        ("app.py", 3, "HO101", "error")
    ]
    assert run(root, [str(root / "pkg" / "unrelated.py")], cache_dir=None) == []


def test_a_symlink_added_after_a_cached_run_is_seen(tmp_path: Path) -> None:
    """The stored result is keyed on module names too: a new symlink adds an import name."""
    files = {
        **PKG,
        "app.py": "from shim import Builder\nclass App(Builder):\n    def build(self, block_table, seq_lens): ...\n",
    }
    root = _tree(tmp_path / "tree", files)
    cache = str(tmp_path / "cache")
    assert run(root, cache_dir=cache) == PKG_CRASH
    (root / "shim.py").symlink_to("pkg/base.py")
    want = [("app.py", 3, "HO101", "error"), *PKG_CRASH]
    assert run(root, cache_dir=None) == want
    assert run(root, cache_dir=cache) == want


# Import names never depend on which sub-path of the project is passed: ``pkg`` below has no
# ``__init__.py`` (a PEP 420 namespace package) unless the case says so.

NAMESPACE = {"proj/pkg/base.py": PKG["pkg/base.py"], "proj/pkg/sub.py": PKG["pkg/sub.py"]}


@pytest.mark.parametrize("regular", [False, True], ids=["namespace", "regular"])
@pytest.mark.parametrize(
    "given",
    [["."], ["pkg"], ["pkg/base.py", "pkg/sub.py"], ["--changed", "pkg/base.py"]],
    ids=["dot", "pkg", "files", "changed"],
)
def test_namespace_package_names_do_not_depend_on_the_sub_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overrides: Any, given: list[str], regular: bool
) -> None:
    root = _tree(tmp_path, {**NAMESPACE, **({"proj/pkg/__init__.py": ""} if regular else {})})
    monkeypatch.chdir(root / "proj")
    run = overrides("--format", "json", *given, cache=False)
    assert run.exit_code == 1, run
    (finding,) = run.json()
    assert (finding["path"], finding["line"], finding["severity"]) == ("pkg/sub.py", 3, "error")
    assert finding["class"] == "pkg.sub.Sub"  # the baseline key is the same whatever was passed


def test_namespace_package_named_from_the_project_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overrides: Any
) -> None:
    """Run from outside the project: ``pkg.base`` is named from the ``pyproject.toml`` root."""
    root = _tree(tmp_path, {**NAMESPACE, "proj/pyproject.toml": "", "elsewhere/x.txt": ""})
    monkeypatch.chdir(root / "elsewhere")
    for given in (["../proj/pkg"], ["../proj/pkg/base.py", "../proj/pkg/sub.py"]):
        run = overrides("--format", "json", *given, cache=False)
        assert run.exit_code == 1, run
        assert [f["severity"] for f in run.json()] == ["error"]


def test_a_base_module_named_from_another_root_is_a_warning_not_silence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overrides: Any
) -> None:
    """From inside ``pkg`` with no project marker, ``pkg.base`` cannot be named: HO405."""
    root = _tree(tmp_path, NAMESPACE)
    monkeypatch.chdir(root / "proj" / "pkg")
    run = overrides("--format", "json", ".", cache=False)
    assert run.exit_code == 0, run
    (finding,) = run.json()
    assert (finding["code"], finding["path"], finding["line"]) == ("HO405", "sub.py", 2)
    assert "'pkg.base'" in finding["message"] and str(root / "proj") in finding["message"]
    assert overrides(".", "--fail-on", "warning", cache=False).exit_code == 1


def test_a_missing_module_that_no_file_would_be_is_no_warning(tmp_path: Path) -> None:
    files = {
        "app.py": "from notinstalled.base import Builder\nclass App(Builder):\n    def build(self, x): ...\n"
    }
    assert run(_tree(tmp_path, files), cache_dir=None) == []


@pytest.mark.parametrize("fixture", ["mla_drift", "evidence.py", "reachability.py"])
def test_a_check_leaves_no_cyclic_garbage(fixture: str) -> None:
    # The project's class/module graph and the evidence index are freed by reference counting
    # when the check ends: a cyclic collection over the whole tree would cost a large
    # tree tens of milliseconds on every run (`--changed` included).
    import gc

    root = Path(__file__).parent / "fixtures" / fixture
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        check([str(root)], options=CheckOptions(cache_dir=None, cwd=str(root.parent)))
        gc.collect()
        left = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert not left & {"ClassInfo", "ModuleInfo", "Project", "EvidenceIndex", "Reach"}, left


def test_the_naming_roots_are_the_paths_less_the_names_they_spell_most_used_first() -> None:
    from harness.overrides.cache import Source
    from harness.overrides.checker import _naming_roots
    from harness.overrides.discover import SourceFile

    files = [
        SourceFile("/p/src/pkg/__init__.py", "pkg", "pkg", True, ("src.pkg",)),
        SourceFile("/p/src/pkg/mod.py", "pkg/mod.py", "pkg.mod", False, ("mod", "src.pkg.mod")),
        SourceFile("/p/src/my.dir/x.py", "x.py", "my.dir.x", False, ("x",)),  # no spelling
        SourceFile("/p/docs/link.py", "link.py", "pkg.link", False, ("aaa.link",)),
        SourceFile("/top.py", "top.py", "top", False, ()),
    ]
    roots = _naming_roots([Source(f, b"", "") for f in files])
    assert roots == ["/p/src", "/p", "/p/src/pkg", "/p/src/my.dir", "/"]
