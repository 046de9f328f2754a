"""The builders' API era, decided from signatures; a tree outside both eras is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.fidelity.era import Era, builder_era
from harness.fidelity.tree import VllmTree

from .conftest import write_tree

FLASH_ATTN = "vllm/v1/attention/backends/flash_attn.py"


def _builder(init: str, build: str) -> str:
    return (
        "class FlashAttentionMetadataBuilder:\n"
        f"    def __init__(self, {init}):\n        pass\n"
        f"    def build(self, {build}):\n        pass\n"
    )


@pytest.mark.parametrize(
    ("init", "build", "era"),
    [
        (
            "runner, kv_cache_spec, block_table",
            "num_reqs, num_actual_tokens, max_query_len, common_prefix_len, common_attn_metadata",
            Era.RUNNER,
        ),
        (
            "kv_cache_spec: AttentionSpec, layer_names, vllm_config, device",
            "common_prefix_len, common_attn_metadata, fast_build=False",
            Era.SPEC,
        ),
    ],
)
def test_the_era_comes_from_the_signatures(tmp_path: Path, init: str, build: str, era: Era) -> None:
    # The version says 0.34.0 either way: it is never consulted.
    source = write_tree(tmp_path, {FLASH_ATTN: _builder(init, build)}, version="0.34.0")
    assert builder_era(VllmTree(source)) is era


def test_a_tree_without_builders_has_no_era(tmp_path: Path) -> None:
    assert builder_era(VllmTree(write_tree(tmp_path, {}))) is None


def test_a_tree_outside_both_eras_is_refused_in_one_line(tmp_path: Path) -> None:
    # vLLM 0.8's V1 builders took the runner alone.
    source = write_tree(tmp_path, {FLASH_ATTN: _builder("runner", "num_reqs, num_actual_tokens")})
    with pytest.raises(HarnessError) as excinfo:
        builder_era(VllmTree(source))
    message = str(excinfo.value)
    assert "outside the supported eras" in message and "takes (runner)" in message
    assert f"({FLASH_ATTN}:1)" in message and "\n" not in message
