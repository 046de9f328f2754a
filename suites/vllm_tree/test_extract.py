"""Single definitions of a tree's file, run without the module around them."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from harness.errors import HarnessError
from harness.vllm_tree.extract import exec_attribute_assignments, extract_definitions


def test_only_the_named_definitions_run(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import enum\nimport not_installed\nfrom typing import NoSuchNameInThisPython\n"
        "LIMIT: int = 3\nX = 1 << 4\n"
        "@register\ndef f(a: Missing) -> Missing:\n    return a * X\n"
        "def g():\n    raise AssertionError\n"
        "class Mode(enum.Enum):\n    NONE = 0\n"
    )
    namespace: dict[str, Any] = {}
    assert extract_definitions(source, ["f", "X", "LIMIT", "Mode"], namespace) == []
    assert namespace["f"](2) == 32 and namespace["LIMIT"] == 3 and "g" not in namespace
    assert namespace["Mode"].NONE.value == 0  # with the file's standard-library imports
    with pytest.raises(HarnessError, match="defines none of: nope"):
        extract_definitions(source, ["nope"], {})
    assert extract_definitions(source, ["f", "nope"], {}, required=False) == ["nope"]


def test_a_class_keeps_only_its_methods_builtin_decorators(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "class Buffer:\n"
        "    def __init__(self, *size: Missing, dtype: Missing) -> Missing:\n"
        "        self.size = size\n"
        "    @staticmethod\n"
        "    def zero() -> int:\n"
        "        return 0\n"
        "    @property\n"
        "    def n(self) -> int:\n"
        "        return len(self.size)\n"
        "    @torch.compile\n"
        "    def total(self) -> int:\n"
        "        return sum(self.size)\n"
    )
    namespace: dict[str, Any] = {}
    extract_definitions(source, ["Buffer"], namespace)
    buffer = namespace["Buffer"](2, 3, dtype=None)
    assert buffer.n == 2 and buffer.zero() == 0 and buffer.total() == 5


def test_attribute_assignments_run_vllms_statements_on_a_stand_in(tmp_path: Path) -> None:
    source = tmp_path / "runner.py"
    source.write_text(
        "class Runner:\n"
        "    def __init__(self, n):\n"
        "        self.n = n\n"
        "        self.buf = torch.zeros(self.n, dtype=torch.int32)\n"
        "        self.buf_np = self.buf.numpy()\n"
        "        self.other = heavy_call()\n"
    )
    stand_in = SimpleNamespace(n=3)
    namespace = {"torch": torch, "self": stand_in}
    exec_attribute_assignments(source, "Runner", "__init__", ["buf", "buf_np"], namespace)
    assert stand_in.buf.dtype == torch.int32 and stand_in.buf_np.shape == (3,)
    with pytest.raises(HarnessError, match="assigns none of: missing"):
        exec_attribute_assignments(source, "Runner", "__init__", ["missing"], namespace)


def test_a_dataclass_keeps_its_standard_library_decorator_and_its_class_variables(
    tmp_path: Path,
) -> None:
    """vLLM 0.9.0's ``MLADims``: a dataclass cut out into a module not (yet) imported."""
    source = tmp_path / "utils.py"
    source.write_text(
        "from dataclasses import dataclass\nfrom typing import ClassVar, Optional\n"
        "import triton\n\n"
        "@dataclass\nclass Dims:\n    KIND: ClassVar[str] = 'mla'\n"
        "    q_lora_rank: Optional[int]\n    kv_lora_rank: int\n\n"
        "@triton.jit\ndef dims(config: Missing) -> Dims:\n    return Dims(None, config)\n"
    )
    namespace: dict[str, Any] = {"__name__": "vllm.attention.backends.utils"}
    extract_definitions(source, ["Dims", "dims"], namespace)
    assert namespace["dims"](512) == namespace["Dims"](None, 512)  # triton.jit was dropped
    assert namespace["Dims"].KIND == "mla" and "vllm.attention.backends.utils" not in sys.modules


def test_a_definition_that_fails_to_run_is_a_one_line_error(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import functools\n\n@functools.lru_cache(maxsize='x')\ndef f():\n    pass\n")
    with pytest.raises(HarnessError, match=r"cannot run definitions of .*m\.py: TypeError"):
        extract_definitions(source, ["f"], {})
