"""The era is read from the builder's signatures (a loaded class or the tree's text), never from
a version string; a builder of neither era is one line naming both signatures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.vllm_tree.era import Era, OutsideEras, builder_era, tree_era
from suites.vllm_tree.conftest import write_tree

FLASH_ATTN = "vllm/v1/attention/backends/flash_attn.py"
RUNNER_INIT = "runner, kv_cache_spec, block_table"
RUNNER_BUILD = "num_reqs, num_actual_tokens, max_query_len, common_prefix_len, common_attn_metadata"
SPEC_INIT = "kv_cache_spec: AttentionSpec, layer_names, vllm_config, device"
SPEC_BUILD = "common_prefix_len, common_attn_metadata, fast_build=False"


class Runner09:
    def __init__(self, runner: Any, kv_cache_spec: Any, block_table: Any) -> None: ...

    def build(
        self,
        num_reqs: int,
        num_actual_tokens: int,
        max_query_len: int,
        common_prefix_len: int,
        common_attn_metadata: Any,
    ) -> None: ...


class Spec034:
    def __init__(
        self, kv_cache_spec: Any, layer_names: Any, vllm_config: Any, device: Any, **kw: Any
    ) -> None: ...

    def build(
        self, common_prefix_len: int, common_attn_metadata: Any, fast_build: bool = False
    ) -> None: ...


class Mixed:
    def __init__(
        self, kv_cache_spec: Any, layer_names: Any, vllm_config: Any, device: Any
    ) -> None: ...

    def build(self, num_reqs: int, common_attn_metadata: Any) -> None: ...


def test_each_era_is_recognised_from_a_class() -> None:
    assert builder_era(Runner09) is Era.RUNNER
    assert builder_era(Spec034) is Era.SPEC


def test_a_class_of_neither_era_is_refused_with_both_signatures() -> None:
    with pytest.raises(OutsideEras) as info:
        builder_era(Mixed)
    message = str(info.value)
    assert "build(num_reqs, common_attn_metadata)" in message
    assert "match neither supported era" in message and "\n" not in message


def _builder(init: str, build: str) -> str:
    return (
        "class FlashAttentionMetadataBuilder:\n"
        f"    def __init__(self, {init}):\n        pass\n"
        f"    def build(self, {build}):\n        pass\n"
    )


@pytest.mark.parametrize(
    ("init", "build", "era"),
    [(RUNNER_INIT, RUNNER_BUILD, Era.RUNNER), (SPEC_INIT, SPEC_BUILD, Era.SPEC)],
)
def test_a_trees_era_comes_from_its_text(tmp_path: Path, init: str, build: str, era: Era) -> None:
    # The version says 0.34.0 either way: it is never consulted.
    tree = write_tree(tmp_path, {FLASH_ATTN: _builder(init, build)}, version="0.34.0")
    assert tree_era(tree) is era


def test_a_tree_without_builders_has_no_era(tmp_path: Path) -> None:
    assert tree_era(write_tree(tmp_path, {})) is None


def test_a_tree_outside_both_eras_is_refused_in_one_line(tmp_path: Path) -> None:
    # vLLM 0.8's V1 builders took the runner alone.
    tree = write_tree(tmp_path, {FLASH_ATTN: _builder("runner", "num_reqs, num_actual_tokens")})
    with pytest.raises(OutsideEras) as info:
        tree_era(tree)
    message = str(info.value)
    assert "match neither supported era" in message and "__init__(runner) and build(" in message
    assert f"({FLASH_ATTN}:1)" in message and "\n" not in message
