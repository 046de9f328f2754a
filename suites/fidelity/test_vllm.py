"""The compared modules, loaded from a tree: once loaded, vLLM code that uses a stub fails,
naming it, instead of answering (a stub compared with ``==`` once answered ``False``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.fidelity.vllm import open_vllm
from harness.vllm_tree.stubbing import LEDGER, StubUsed
from harness.vllm_tree.tree import VllmTree, locate_tree

from .conftest import FAKE_MODULES, FIXTURES

DECIDES = """\
from vllm.attention.backends.abstract import AttentionType
from vllm.platforms import current_platform

KIND = AttentionType.DECODER  # import time: a stub may be read


def is_decoder(attn_type):
    return attn_type == AttentionType.ENCODER_ONLY  # a stub: no answer


def platform_is_cuda():
    return current_platform.is_cuda()  # provided: answered
"""


def _tree(tmp_path: Path) -> VllmTree:
    shutil.copytree(FIXTURES / "fake_vllm", tmp_path / "tree")
    (tmp_path / "tree" / "vllm" / "v1" / "decides.py").write_text(DECIDES)
    return locate_tree(tmp_path / "tree")


def test_once_loaded_a_stub_the_compared_code_uses_raises_naming_it(tmp_path: Path) -> None:
    with open_vllm(_tree(tmp_path), (*FAKE_MODULES, "vllm.v1.decides")) as vllm:
        decides = vllm.module("v1.decides")
        assert decides.platform_is_cuda() is False
        with pytest.raises(StubUsed, match=r"vllm\.attention\.backends\.abstract\.AttentionType"):
            decides.is_decoder("decoder")
        with pytest.raises(RuntimeError, match="neither loaded from source nor provided"):
            vllm.module("attention.backends.abstract")
    assert not LEDGER.is_strict  # in-process callers after the block are not refused


def test_a_compared_module_the_tree_lacks_is_a_clear_error(tmp_path: Path) -> None:
    missing = ("vllm.v1.attention.backends.flashinfer",)
    with (
        pytest.raises(HarnessError, match=r"not a vLLM source tree: missing .*flashinfer\.py"),
        open_vllm(_tree(tmp_path), missing),
    ):
        pass
