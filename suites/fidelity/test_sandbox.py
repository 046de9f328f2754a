"""The sandbox: real modules from source text, stubs that refuse to be values, nothing leaks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.fidelity.sandbox import (
    StubValueError,
    VllmSandbox,
    exec_attribute_assignments,
    extract_definitions,
)
from harness.fidelity.source import VllmSource
from harness.fidelity.stubs import PlanRecorder, make_stubs
from harness.fidelity.tree import VllmTree

from .conftest import FIXTURES

READS_A_STUB = "vllm.v1.reads_a_stub"


def _sandbox(source: VllmSource, *real: str) -> VllmSandbox:
    return VllmSandbox(source.root, real, make_stubs(VllmTree(source), PlanRecorder()))


def test_real_modules_run_from_source_and_the_rest_is_stubbed(fake_vllm: VllmSource) -> None:
    with _sandbox(fake_vllm, READS_A_STUB, "vllm.v1.worker.block_table") as sandbox:
        module = sandbox.load(READS_A_STUB)
        assert module.__file__ == str(fake_vllm.root / "vllm/v1/reads_a_stub.py")
        assert module.block_table.BlockTable.__module__ == "vllm.v1.worker.block_table"
        assert issubclass(module.Layer, module.SomeLayer)  # subclassing a stub works
        assert module.read_env() is False  # an explicit stub value
        with pytest.raises(StubValueError, match=r"SomeLayer\.threshold"):
            module.decide()  # a stub read as a value fails loudly


def test_sys_modules_are_restored_and_installed_vllm_is_never_imported(
    fake_vllm: VllmSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(FIXTURES / "tripwire"))  # an "installed" vllm that explodes
    sentinel = type(sys)("vllm")
    monkeypatch.setitem(sys.modules, "vllm", sentinel)  # something already imported as vllm
    with _sandbox(fake_vllm, "vllm.v1.kv_cache_interface") as sandbox:
        assert "vllm" not in sys.modules  # set aside on entry
        sandbox.load("vllm.v1.kv_cache_interface")
        sandbox.load("vllm.anything.at.all")  # stubbed, not found on sys.path
        assert sys.modules["vllm"] is not sentinel
    assert sys.modules["vllm"] is sentinel
    assert not [n for n in sys.modules if n.startswith("vllm.")]
    del sys.modules["vllm"]
    with pytest.raises(ImportError, match="TRIPWIRE"):  # outside, the real path is untouched
        __import__("vllm")


def test_package_init_files_are_never_executed(fake_vllm: VllmSource) -> None:
    # fake_vllm/vllm/__init__.py raises; loading a submodule must not run it.
    with _sandbox(fake_vllm, "vllm.v1.worker.block_table") as sandbox:
        assert sandbox.load("vllm").__name__ == "vllm"


def test_missing_real_module_is_a_clear_error(fake_vllm: VllmSource) -> None:
    with pytest.raises(HarnessError, match=r"not a vLLM source tree: missing .*flashinfer\.py"):
        _sandbox(fake_vllm, "vllm.v1.attention.backends.flashinfer")


def test_load_outside_the_block_is_refused(fake_vllm: VllmSource) -> None:
    sandbox = _sandbox(fake_vllm, READS_A_STUB)
    with pytest.raises(RuntimeError, match="outside"):
        sandbox.load(READS_A_STUB)


def test_extract_definitions_runs_only_the_named_ones(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "import not_installed\nLIMIT: int = 3\nX = 1 << 4\n"
        "def f(a: Missing) -> Missing:\n    return a * X\n"
        "def g():\n    raise AssertionError\n"
    )
    namespace = extract_definitions(source, ["f", "X"], {})
    assert namespace["f"](2) == 32 and "g" not in namespace
    with pytest.raises(HarnessError, match="defines none of: nope"):
        extract_definitions(source, ["nope"], {})


def test_exec_attribute_assignments_runs_vllms_statements_on_a_stand_in(tmp_path: Path) -> None:
    source = tmp_path / "runner.py"
    source.write_text(
        "class Runner:\n"
        "    def __init__(self, n):\n"
        "        self.n = n\n"
        "        self.buf = torch.zeros(self.n, dtype=torch.int32)\n"
        "        self.buf_np = self.buf.numpy()\n"
        "        self.other = heavy_call()\n"
    )

    class StandIn:
        n = 3

    stand_in = StandIn()
    exec_attribute_assignments(source, "Runner", "__init__", ["buf", "buf_np"], stand_in)
    assert stand_in.buf.dtype.is_floating_point is False and stand_in.buf_np.shape == (3,)  # type: ignore[attr-defined]
    with pytest.raises(HarnessError, match="assigns none of: missing"):
        exec_attribute_assignments(source, "Runner", "__init__", ["missing"], stand_in)


def test_extract_definitions_takes_a_class_with_its_builtin_decorators(tmp_path: Path) -> None:
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
    )
    buffer = extract_definitions(source, ["Buffer"], {})["Buffer"]
    assert buffer(2, 3, dtype=None).n == 2 and buffer.zero() == 0
