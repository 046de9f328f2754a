"""A tree loaded for the adapter: its modules come and go with the session, nothing is written."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from harness.adapter.jobs import list_job
from harness.adapter.platform import PlatformOptions
from harness.adapter.session import open_tree
from harness.vllm_tree.tree import VllmTree
from suites.adapter.conftest import ERA034, copy_tree


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_the_tree_is_left_byte_for_byte_as_it_was(tmp_path: Path) -> None:
    tree = copy_tree(ERA034, tmp_path)
    before = _digest(tree.root)
    rows = list_job(tree, PlatformOptions(), None, 6, 0)
    assert [r["status"] for r in rows] == ["runs", "runs", "stops"]
    assert _digest(tree.root) == before


def test_modules_leave_sys_modules_with_the_session(era034: VllmTree) -> None:
    before = {n for n in sys.modules if n.split(".")[0] == "vllm"}
    with open_tree(era034, PlatformOptions()) as session:
        module = session.module("vllm.v1.attention.backends.toy")
        assert module.__file__ == str(era034.root / "vllm/v1/attention/backends/toy.py")
    assert {n for n in sys.modules if n.split(".")[0] == "vllm"} == before
