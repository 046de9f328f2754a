"""The tree index: where a vLLM tree defines things, found from its text alone."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.fidelity.source import VllmSource, locate_vllm_source
from harness.fidelity.tree import Location, VllmTree

from .conftest import write_tree


def test_definitions_are_found_wherever_they_live(tmp_path: Path) -> None:
    tree = VllmTree(
        write_tree(
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


def test_the_tree_is_read_never_imported(fake_vllm: VllmSource) -> None:
    before = set(sys.modules)
    tree = VllmTree(fake_vllm)
    assert tree.module_defining("FullAttentionSpec") == "vllm.v1.kv_cache_interface"
    assert tree.module_defining("cdiv") == "vllm.utils"  # its utils.py raises if imported
    assert not [m for m in set(sys.modules) - before if m.startswith("vllm")]
    assert VllmTree(locate_vllm_source(fake_vllm.root)).version == "0.0.0+fake"


def test_uses_finds_the_first_line_reading_a_name(tmp_path: Path) -> None:
    source = write_tree(
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
    tree = VllmTree(source)
    assert tree.uses("vllm.v1.spec", "Spec.size", "max_in_flight_tokens") == Location(
        "vllm/v1/spec.py", 4
    )
    assert tree.uses("vllm.v1.spec", "Spec.size", "type_id") is None
    assert tree.uses("vllm.v1.spec", "Spec.missing", "x") is None
