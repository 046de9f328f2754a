"""Locating a vLLM tree (clear refusals), and where it defines things, from its text alone."""

from __future__ import annotations

import ast
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.vllm_tree.tree import Location, VllmTree, locate_tree, parse_source
from suites.adapter.conftest import ERA034, ERA09
from suites.vllm_tree.conftest import write_tree


def test_the_root_and_the_package_directory_are_both_accepted() -> None:
    assert locate_tree(ERA034) == locate_tree(ERA034 / "vllm")
    assert locate_tree(ERA034).root == ERA034.resolve()
    assert locate_tree(ERA09).version == "0.9.0+fixture"
    assert locate_tree(ERA034).label == f"{ERA034.resolve()} (vLLM 0.34.0+fixture)"


def test_a_checkout_without_a_version_file_is_a_tree_without_a_version(tmp_path: Path) -> None:
    (tmp_path / "vllm" / "v1").mkdir(parents=True)
    (tmp_path / "vllm" / "v1" / "kv_cache_interface.py").write_text("")
    tree = locate_tree(tmp_path)
    assert tree.version is None and tree.label == str(tmp_path.resolve())


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("nope", r"--base .*nope: no such directory$"),
        ("a-file", r"--base .*a-file: not a directory$"),
        ("loop", r"--base .*loop: a symbolic link that leads nowhere \(a loop, or a target"),
        (".", r"not a vLLM tree \(no vllm/ directory here\); give the directory that holds"),
        ("v0", r"a vllm package without the V1 engine \(no vllm/v1/kv_cache_interface\.py\)"),
        ("v0/vllm", r"without the V1 engine .*outside the supported eras \(vLLM 0\.9 and later\)"),
    ],
)
def test_what_is_not_a_vllm_tree_is_refused_in_one_line(
    tmp_path: Path, given: str, why: str
) -> None:
    (tmp_path / "a-file").write_text("")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "v0" / "vllm").mkdir(parents=True)
    (tmp_path / "v0" / "vllm" / "__init__.py").write_text("raise ImportError('V0')\n")
    with pytest.raises(HarnessError, match=why) as info:
        locate_tree(tmp_path / given, "--base")
    assert "\n" not in str(info.value)


def test_definitions_are_found_wherever_they_live(tmp_path: Path) -> None:
    tree = write_tree(
        tmp_path,
        {
            "vllm/utils/__init__.py": "from vllm.utils.math_utils import cdiv\n",
            "vllm/utils/math_utils.py": "X: int = 3\n\ndef cdiv(a, b):\n    return -(a // -b)\n",
            "vllm/attention/layer.py": "class Builder:\n    pass\n",
            "vllm/v1/attention/builder.py": (
                "class Base:\n    def build(self, a, *, b):\n        pass\n\n"
                "class Builder(Base):\n    kind: str = 'v1'\n"
                "    def __init__(self, spec, names):\n        pass\n"
            ),
        },
    )
    assert tree.module_defining("cdiv") == "vllm.utils.math_utils"  # not the re-export
    assert tree.module_defining("X", under=("vllm.utils",)) == "vllm.utils.math_utils"
    assert tree.module_defining("Builder") == "vllm.v1.attention.builder"  # V1 before V0
    assert tree.modules_defining("Builder") == ["vllm.attention.layer", "vllm.v1.attention.builder"]
    assert tree.module_defining("missing") is None
    module = "vllm.v1.attention.builder"
    assert tree.parameters(module, "Builder.__init__") == ["spec", "names"]
    assert tree.parameters(module, "Builder.build") == ["a", "b"]  # from the base class
    assert tree.location(module, "Builder.kind") == Location("vllm/v1/attention/builder.py", 6)
    assert str(tree.location(module, "Builder")) == "vllm/v1/attention/builder.py:5"
    assert tree.find(module, "Builder.nothing") is None
    assert tree.syntax("vllm.not_there") is None
    assert tree.module_file("vllm.utils") == tree.root / "vllm/utils/__init__.py"


def test_the_tree_is_read_never_imported(tmp_path: Path) -> None:
    tree = write_tree(
        tmp_path,
        {
            "vllm/__init__.py": "raise ImportError('never run')\n",
            "vllm/utils.py": "raise ImportError('never run')\ndef cdiv(a, b):\n    return 1\n",
        },
    )
    before = set(sys.modules)
    assert tree.module_defining("cdiv") == "vllm.utils"
    assert not [m for m in set(sys.modules) - before if m.startswith("vllm")]


def test_uses_finds_the_first_line_reading_a_name(tmp_path: Path) -> None:
    tree: VllmTree = write_tree(
        tmp_path,
        {
            "vllm/v1/spec.py": (
                "class Spec:\n"
                "    def size(self, config):\n"
                "        x = 1\n"
                "        return f(tokens=config.max_in_flight_tokens) + g(max_in_flight_tokens=x)\n"
            )
        },
    )
    assert tree.uses("vllm.v1.spec", "Spec.size", "max_in_flight_tokens") == Location(
        "vllm/v1/spec.py", 4
    )
    assert tree.uses("vllm.v1.spec", "Spec.size", "type_id") is None
    assert tree.uses("vllm.v1.spec", "Spec.missing", "x") is None


def _never_blocks(read: Callable[[], object], fifo: Path) -> object:
    """``read()`` in a thread; a read that waits for a writer fails the test instead of hanging it
    (the writer this opens afterwards lets such a thread end)."""
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(_caught(read)), daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"reading {fifo} blocked")
    return outcome[0]


def _caught(read: Callable[[], object]) -> object:
    try:
        return read()
    except HarnessError as exc:
        return exc


def test_a_fifo_named_like_a_module_is_refused_never_read(tmp_path: Path) -> None:
    """A file that never ends (a FIFO, a device) hung ``memory scaling`` before any child ran."""
    tree = write_tree(tmp_path, {"vllm/platforms/cuda.py": "X = 1\n"})
    fifo = tree.root / "vllm" / "platforms" / "zz.py"
    os.mkfifo(fifo)
    error = _never_blocks(lambda: parse_source(fifo), fifo)
    assert isinstance(error, HarnessError) and str(error).endswith("zz.py: not a regular file")
    assert _never_blocks(lambda: tree.module_defining("X"), fifo) == "vllm.platforms.cuda"
    version = tree.root / "vllm" / "_version.py"
    version.unlink()
    os.mkfifo(version)
    assert _never_blocks(lambda: locate_tree(tree.root).version, version) is None


@pytest.mark.parametrize(
    ("source", "error"),
    [
        (b"# -*- coding: latin-1 -*-\nNAME = '\xe9'\n", None),  # Python honours the cookie
        (b"NAME = '\xe9'\n", r"cannot parse .*m\.py: \(unicode error\) 'utf-8' codec"),
        (b"NAME = 1\x00\n", r"cannot parse .*m\.py: source code string cannot contain null bytes$"),
    ],
)
def test_source_is_decoded_as_python_decodes_a_module(
    tmp_path: Path, source: bytes, error: str | None
) -> None:
    """Non-UTF-8 source was a UnicodeDecodeError traceback."""
    path = tmp_path / "m.py"
    path.write_bytes(source)
    if error is None:
        assert ast.literal_eval(parse_source(path).body[0].value) == "é"  # type: ignore[attr-defined]
        return
    with pytest.raises(HarnessError, match=error):
        parse_source(path)


def test_a_vllm_directory_linked_from_elsewhere_keeps_tree_relative_paths(tmp_path: Path) -> None:
    """Findings named ``/abs/path/vllm/...`` instead of ``vllm/...`` when ``vllm`` was a link."""
    elsewhere = write_tree(tmp_path / "elsewhere", {"vllm/v1/x.py": "X = 1\n"})
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "vllm").symlink_to(elsewhere.root / "vllm")
    tree = locate_tree(tmp_path / "tree")
    assert tree.relative(str(tree.root / "vllm" / "v1" / "x.py")) == "vllm/v1/x.py"
    assert tree.relative("/somewhere/else.py") == "/somewhere/else.py"


def test_a_path_with_a_newline_cannot_forge_a_line_of_its_own(tmp_path: Path) -> None:
    """A directory named ``x\\n::error file=a.py::forged`` printed a GitHub annotation."""
    forged = tmp_path / "x\n::error file=a.py::forged"
    tree = write_tree(forged, {})
    assert "\n" not in tree.label and "x\\n::error file=a.py::forged" in tree.label
    with pytest.raises(HarnessError) as info:
        locate_tree(forged / "nope")
    assert "\n" not in str(info.value)
