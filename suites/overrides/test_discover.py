"""discover: module names for packages, namespace packages and src layouts; loops; errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.overrides.discover import discover, display_path, module_names


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_package_namespace_and_src_layout(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "vllm/__init__.py": "",
            "vllm/v1/__init__.py": "",
            "vllm/v1/worker.py": "",
            "ns/plugins/rocm.py": "",
            "src/engine/__init__.py": "",
            "src/engine/base.py": "",
            ".venv/lib/x.py": "",
            "vllm/__pycache__/x.py": "",
            "notes.txt": "",
        },
    )
    files, unreadable = discover([str(tmp_path)], cwd=str(tmp_path))
    assert unreadable == []
    by_display = {f.display: f for f in files}
    assert sorted(by_display) == [
        "ns/plugins/rocm.py",
        "src/engine/__init__.py",
        "src/engine/base.py",
        "vllm/__init__.py",
        "vllm/v1/__init__.py",
        "vllm/v1/worker.py",
    ]
    assert by_display["vllm/v1/worker.py"].module == "vllm.v1.worker"
    assert by_display["vllm/v1/__init__.py"].module == "vllm.v1"
    assert by_display["vllm/v1/__init__.py"].is_package
    rocm = by_display["ns/plugins/rocm.py"]
    assert rocm.module == "ns.plugins.rocm" and set(rocm.aliases) == {"plugins.rocm", "rocm"}
    assert by_display["src/engine/base.py"].module == "engine.base"


def test_symlink_loop_is_reported_and_walk_terminates(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": ""})
    os.symlink(tmp_path / "pkg", tmp_path / "pkg" / "loop")
    os.symlink(tmp_path / "pkg" / "self.py", tmp_path / "pkg" / "self.py")
    files, unreadable = discover([str(tmp_path)], cwd=str(tmp_path))
    assert [f.display for f in files] == ["pkg/__init__.py", "pkg/a.py"]
    assert sorted((u.display, u.reason) for u in unreadable) == [
        ("pkg/loop", "symlink loop"),
        ("pkg/self.py", "symlink loop"),
    ]


def test_each_file_once_even_if_given_twice(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": ""})
    files, _ = discover([str(tmp_path), str(tmp_path / "a.py")], cwd=str(tmp_path))
    assert [f.display for f in files] == ["a.py"]


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="does not exist"):
        discover([str(tmp_path / "nope")])


def test_display_paths(tmp_path: Path) -> None:
    assert display_path(tmp_path / "a" / "b.py", str(tmp_path)) == "a/b.py"
    outside = display_path("/elsewhere/x.py", str(tmp_path))
    assert outside == "/elsewhere/x.py"


def test_explicit_non_python_files_are_skipped(tmp_path: Path) -> None:
    write(tmp_path, {"README.md": "# hi", "stub.pyi": "class A: ..."})
    files, _ = discover(
        [str(tmp_path / "README.md"), str(tmp_path / "stub.pyi")], cwd=str(tmp_path)
    )
    assert [(f.display, f.module) for f in files] == [("stub.pyi", "stub")]


def test_direct_paths_win_over_symlinked_duplicates(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/__init__.py": "", "pkg/base.py": "", "docs/examples/x.py": ""})
    (tmp_path / "docs" / "examples" / "base.py").symlink_to("../../pkg/base.py")
    (tmp_path / "aaa").symlink_to("pkg", target_is_directory=True)
    files, unreadable = discover([str(tmp_path)], cwd=str(tmp_path))
    assert unreadable == []
    assert [(f.display, f.module) for f in files] == [
        ("docs/examples/x.py", "docs.examples.x"),
        ("pkg/__init__.py", "pkg"),
        ("pkg/base.py", "pkg.base"),
    ]
    assert "docs.examples.base" in files[2].aliases
    assert "aaa.base" in files[2].aliases and "aaa" in files[1].aliases  # the link's names too


def test_a_symlink_to_outside_the_roots_is_walked_where_it_is(tmp_path: Path) -> None:
    write(tmp_path, {"elsewhere/lib/__init__.py": "", "elsewhere/lib/core.py": ""})
    write(tmp_path, {"proj/pkg/__init__.py": ""})
    (tmp_path / "proj" / "pkg" / "lib").symlink_to(tmp_path / "elsewhere" / "lib")
    (tmp_path / "proj" / "one.py").symlink_to(tmp_path / "elsewhere" / "lib" / "core.py")
    files, _ = discover([str(tmp_path / "proj")], cwd=str(tmp_path / "proj"))
    assert [(f.display, f.module) for f in files] == [
        ("one.py", "one"),  # the first path through a symlink names it ...
        ("pkg/__init__.py", "pkg"),
        ("pkg/lib/__init__.py", "pkg.lib"),
    ]
    assert "pkg.lib.core" in files[0].aliases  # ... and the others are aliases of it
    assert files[0].real == str((tmp_path / "elsewhere" / "lib" / "core.py").resolve())


def test_module_names_of_a_path_that_does_not_exist(tmp_path: Path) -> None:
    write(tmp_path, {"pkg/__init__.py": ""})
    assert module_names(str(tmp_path / "pkg" / "gone.py"), [str(tmp_path)])[0] == "pkg.gone"
    assert module_names(str(tmp_path / "pkg" / "sub"), [str(tmp_path)])[0] == "pkg.sub"


def test_namespace_files_are_named_from_the_working_directory(tmp_path: Path) -> None:
    """``pkg`` has no ``__init__.py``: scanned as ``pkg`` or file by file from its parent,
    its modules are ``pkg.base`` and ``pkg.sub``, as ``python -m`` there would import them."""
    write(tmp_path, {"pkg/base.py": "", "pkg/sub.py": ""})
    for given in ([tmp_path / "pkg"], [tmp_path / "pkg" / "base.py", tmp_path / "pkg" / "sub.py"]):
        files, _ = discover([str(p) for p in given], cwd=str(tmp_path))
        assert [(f.module, "base" in f.aliases or "sub" in f.aliases) for f in files] == [
            ("pkg.base", True),
            ("pkg.sub", True),
        ]
    gone = module_names(str(tmp_path / "pkg" / "gone.py"), [str(tmp_path / "pkg")], str(tmp_path))
    assert gone[0] == "pkg.gone"


def test_symlinked_directories_inside_a_symlinked_walk_terminate(tmp_path: Path) -> None:
    """``a/to_b -> b`` and ``b/to_a -> a``: each file once, each link's names added once."""
    write(tmp_path, {"a/__init__.py": "", "a/x.py": "", "b/__init__.py": "", "b/y.py": ""})
    (tmp_path / "a" / "to_b").symlink_to(tmp_path / "b", target_is_directory=True)
    (tmp_path / "b" / "to_a").symlink_to(tmp_path / "a", target_is_directory=True)
    files, unreadable = discover([str(tmp_path)], cwd=str(tmp_path))
    assert unreadable == []
    by_module = {f.module: f for f in files}
    assert sorted(by_module) == ["a", "a.x", "b", "b.y"]
    assert "a.to_b.y" in by_module["b.y"].aliases and "b.to_a.x" in by_module["a.x"].aliases


_SGLANG_LAYOUT = {
    "python/pyproject.toml": "[project]\nname = 'sglang'\n",
    "python/sglang/__init__.py": "",
    "python/sglang/srt/__init__.py": "",
    "python/sglang/srt/base.py": "",
    "python/pipelines/diffusers_pipeline.py": "",
}


@pytest.mark.parametrize(
    ("cwd", "scanned"),
    [
        ("python", "."),
        ("python", "pipelines"),
        ("python", "pipelines/diffusers_pipeline.py"),
        ("python/pipelines", "."),
        (".", "python"),
        (".", "python/pipelines"),
    ],
)
def test_a_folder_without_init_is_named_from_its_projects_package_root(
    tmp_path: Path, cwd: str, scanned: str
) -> None:
    """``pipelines/`` beside ``sglang/`` (a regular package) is named from the directory that
    holds ``sglang``, wherever the scan starts."""
    write(tmp_path, _SGLANG_LAYOUT)
    (tmp_path / ".git").mkdir()
    start = tmp_path / cwd
    files, _ = discover([str(start / scanned)], cwd=str(start))
    named = {f.module for f in files if f.path.endswith("diffusers_pipeline.py")}
    assert named == {"pipelines.diffusers_pipeline"}


_SGLANG_WHEEL = {
    "sglang/__init__.py": "",
    "sglang/multimodal_gen/__init__.py": "",
    "sglang/multimodal_gen/runtime/pipelines/diffusers_pipeline.py": "",
    "sglang/srt/hardware_backend/xpu/__init__.py": "",
    "sglang/srt/hardware_backend/xpu/attention.py": "",
    "sglang/srt/hardware_backend/npu/dsv4/dsv4_memory_pool.py": "",
}


@pytest.mark.parametrize(
    ("cwd", "scanned"),
    [
        (".", "sglang"),
        (".", "sglang/srt"),
        ("sglang/srt/hardware_backend", "."),
        ("sglang/srt/hardware_backend/npu/dsv4", "dsv4_memory_pool.py"),
        ("sglang/multimodal_gen/runtime", "pipelines"),
    ],
)
def test_folders_without_init_inside_a_package_are_named_from_its_root(
    tmp_path: Path, cwd: str, scanned: str
) -> None:
    """As sglang 0.5.23's wheel: ``sglang/srt/`` has no ``__init__.py`` under the package
    ``sglang``, so its files are ``sglang.srt...`` (a regular package inside it too), as
    ``from sglang.srt... import`` names them, wherever the scan starts."""
    write(tmp_path, _SGLANG_WHEEL)
    (tmp_path / ".git").mkdir()
    start = tmp_path / cwd
    files, _ = discover([str(start / scanned)], cwd=str(start))
    expected = {
        "diffusers_pipeline.py": "sglang.multimodal_gen.runtime.pipelines.diffusers_pipeline",
        "attention.py": "sglang.srt.hardware_backend.xpu.attention",
        "dsv4_memory_pool.py": "sglang.srt.hardware_backend.npu.dsv4.dsv4_memory_pool",
    }
    for found in files:
        name = found.path.rpartition("/")[2]
        if name in expected:
            assert found.module == expected[name]
    assert any(f.path.rpartition("/")[2] in expected for f in files)
