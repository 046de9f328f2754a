"""The era is read from the builder's signatures, never from a version string."""

from __future__ import annotations

from typing import Any

import pytest

from harness.adapter.era import Era, OutsideEras, builder_era


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


def test_each_era_is_recognised() -> None:
    assert builder_era(Runner09) is Era.RUNNER
    assert builder_era(Spec034) is Era.SPEC


def test_a_builder_of_neither_era_is_refused_with_both_signatures() -> None:
    with pytest.raises(OutsideEras) as info:
        builder_era(Mixed)
    message = str(info.value)
    assert "build(num_reqs, common_attn_metadata)" in message
    assert "match neither supported era" in message
