"""Backends are read from the tree's registry (0.34) or its platform selectors (0.9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.adapter.backends import canonical_name, discover_backends, select_backends
from harness.errors import HarnessError
from harness.vllm_tree.tree import VllmTree
from suites.adapter.conftest import ERA034, copy_tree


def test_the_registry_enum_names_the_backends(era034: VllmTree) -> None:
    entries = discover_backends(era034)
    assert [e.name for e in entries] == ["FLASH_ATTN", "TRITON_ATTN", "FLASHMLA"]
    assert entries[0].class_path == "vllm.v1.attention.backends.toy.ToyBackend"
    assert entries[0].source.startswith("vllm/v1/attention/backends/registry.py:")


def test_the_selectors_class_paths_are_named_by_get_name(era09: VllmTree) -> None:
    entries = {e.name: e for e in discover_backends(era09)}
    assert set(entries) == {"FLASH_ATTN", "FLASHINFER"}
    assert entries["FLASHINFER"].class_name == "KernelBackend"
    assert entries["FLASH_ATTN"].source == "vllm/platforms/cuda.py:5"


def test_vllm_0_9_names_lose_their_v1_suffix() -> None:
    assert canonical_name("FLASH_ATTN_VLLM_V1") == "FLASH_ATTN"
    assert canonical_name("FLASHINFER") == "FLASHINFER"


def test_an_unknown_backend_lists_what_the_tree_has(era034: VllmTree) -> None:
    with pytest.raises(
        HarnessError, match="unknown backend NOPE; the backends of this tree: FLASHM"
    ):
        select_backends(discover_backends(era034), ["NOPE"])


def test_the_default_selection_keeps_the_issues_backends_the_tree_has(era034: VllmTree) -> None:
    chosen = select_backends(discover_backends(era034), None)
    assert [e.name for e in chosen] == ["FLASH_ATTN", "TRITON_ATTN", "FLASHMLA"]
    assert [e.name for e in select_backends(discover_backends(era034), ["FLASH_ATTN_VLLM_V1"])] == [
        "FLASH_ATTN"
    ]


def test_a_registry_value_that_is_no_class_path_is_not_a_backend(tmp_path: Path) -> None:
    tree = copy_tree(ERA034, tmp_path)
    registry = tree.root / "vllm/v1/attention/backends/registry.py"
    registry.write_text(
        registry.read_text().replace(
            "    CUSTOM = None\n",
            '    CUSTOM = None\n    FORGED = "vllm.x\\n::error file=a.py::forged.Backend"\n',
        )
    )
    assert [e.name for e in discover_backends(tree)] == ["FLASH_ATTN", "TRITON_ATTN", "FLASHMLA"]
