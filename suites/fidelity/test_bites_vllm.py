"""Against vLLM's real source: every differential catches a deliberately broken reference.

Integration (``make test-integration``, ``make fidelity``): the vLLM 0.9.0 source tree in
``HARNESS_VLLM_SRC``, else the 0.9.0 wheel's sources fetched once into ~/.cache/harness, so
``make test`` never downloads vLLM. Most breakages put back what the reference did before issue 10
(the disagreements the issue lists).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Generator
from typing import Any

import pytest
import torch

from harness.fidelity.deviation import FoundDeviation, find_deviations
from harness.fidelity.differential import Differential, run_differential
from harness.fidelity.differentials import DIFFERENTIALS
from harness.fidelity.vllm import VllmCode, open_vllm
from harness.reference import kv_cache_utils
from harness.reference import worker as sizing
from harness.reference.backends import flashinfer
from harness.reference.backends.flash_attn import (
    FlashAttentionBackend,
    FlashAttentionMetadataBuilder,
)
from harness.reference.backends.mla import common as mla_common
from harness.reference.backends.utils import copy_slot_mapping
from harness.reference.block_table import BlockTable
from harness.reference.kv_cache_interface import FullAttentionSpec, KVCacheSpec
from harness.reference.runner import ModelRunner
from harness.vllm_tree.fetch import fetch_vllm_source
from harness.vllm_tree.tree import locate_tree

pytestmark = pytest.mark.integration
BY_NAME = {d.name: d for d in DIFFERENTIALS}


@pytest.fixture(scope="module")
def vllm() -> Generator[VllmCode, None, None]:
    given = os.environ.get("HARNESS_VLLM_SRC")
    tree = locate_tree(given) if given else fetch_vllm_source("0.9.0")
    modules = sorted({m for d in DIFFERENTIALS for m in d.vllm_modules(tree)})
    with open_vllm(tree, modules) as code:
        yield code


def _merge_dropping_the_window(cls: type[FullAttentionSpec], specs: list[KVCacheSpec]) -> Any:
    return copy.deepcopy(specs[0])


def _no_unification(kv_cache_spec: dict[str, KVCacheSpec]) -> dict[str, KVCacheSpec]:
    return dict(kv_cache_spec)  # per-type groups whatever the switch says


def _override_ignored(config: Any, num_layers: int, available: int, page_size: int) -> int:
    return max(int(available // page_size // num_layers), 0)


def _utilization_ignored(total: int, utilization: float, peak: int) -> int:
    return int(total * 0.9 - peak)


def _clear_resetting_counts(self: BlockTable) -> None:
    self.block_table.fill_(0)
    self.block_table_cpu.fill_(0)
    self.num_blocks_per_row.fill(0)


_common_attn_metadata = ModelRunner._common_attn_metadata  # pyright: ignore[reportPrivateUsage]


def _query_start_loc_tail_is_the_total(self: ModelRunner, num_reqs: int, *args: Any) -> Any:
    common = _common_attn_metadata(self, num_reqs, *args)
    self.query_start_loc[num_reqs + 1 :] = common.num_actual_tokens
    return common


def _any_block_size(num_blocks: int, block_size: int, num_kv_heads: int, head_size: int) -> Any:
    return (2, num_blocks, block_size, num_kv_heads, head_size)


def _writes_the_buffer(block_table: BlockTable, num_tokens: int, device: torch.device) -> Any:
    return copy_slot_mapping(block_table, num_tokens)


def _window_from_the_group(self: Any) -> flashinfer.PerLayerParameters:
    window = getattr(self.kv_cache_spec, "sliding_window", None)
    head_dim = self.vllm_config.model_config.head_dim
    return flashinfer.PerLayerParameters(-1 if window is None else window - 1, None, head_dim**-0.5)


_use_cascade = FlashAttentionMetadataBuilder.use_cascade_attention


def _always_132_sms(self: Any, **kwargs: Any) -> bool:
    return _use_cascade(self, **{**kwargs, "num_sms": 132})


def _no_check(self: Any) -> None:
    pass


BREAKAGES: list[tuple[str, str, object, str, Callable[..., Any]]] = [
    ("kv-cache-specs", "merge-drops-window", FullAttentionSpec, "merge",
     classmethod(_merge_dropping_the_window)),
    ("kv-cache-config", "hybrid-groups-by-default", kv_cache_utils, "unify_hybrid_kv_cache_specs",
     _no_unification),
    ("kv-cache-config", "override-ignored", kv_cache_utils, "get_num_blocks", _override_ignored),
    ("determine-available-memory", "utilization-ignored", sizing, "determine_available_memory",
     _utilization_ignored),
    ("block-table-row-ops", "clear-resets-counts", BlockTable, "clear", _clear_resetting_counts),
    ("runner-inputs", "query-start-loc-tail", ModelRunner, "_common_attn_metadata",
     _query_start_loc_tail_is_the_total),
    ("flash-attn-metadata", "any-block-size", FlashAttentionBackend, "get_kv_cache_shape",
     staticmethod(_any_block_size)),
    ("flashinfer-metadata", "writes-slot-buffer", flashinfer, "slot_mapping_to_device",
     _writes_the_buffer),
    ("flashinfer-metadata", "group-window-only", flashinfer.FlashInferMetadataBuilder,
     "_get_global_hyperparameters", _window_from_the_group),
    ("flashinfer-metadata", "any-head-size", flashinfer.FlashInferMetadata, "__post_init__",
     _no_check),
    ("cascade", "fixed-sm-count", FlashAttentionMetadataBuilder, "use_cascade_attention",
     _always_132_sms),
    ("mla-split", "writes-slot-buffer", mla_common, "slot_mapping_to_device", _writes_the_buffer),
    ("mla-split", "any-head-size", mla_common.MLACommonMetadata, "__post_init__", _no_check),
]  # fmt: skip


def test_every_differential_has_a_breakage() -> None:
    assert {b[0] for b in BREAKAGES} == set(BY_NAME)


@pytest.mark.parametrize(
    ("name", "owner", "attribute", "broken"),
    [(b[0], *b[2:]) for b in BREAKAGES],
    ids=[f"{b[0]}:{b[1]}" for b in BREAKAGES],
)
def test_a_broken_reference_is_caught(
    vllm: VllmCode,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    owner: object,
    attribute: str,
    broken: Callable[..., Any],
) -> None:
    differential: Differential[Any] = BY_NAME[name]
    assert run_differential(differential, vllm, seed=1, trials=20).ok  # intact: agrees
    monkeypatch.setattr(owner, attribute, broken)
    result = run_differential(differential, vllm, seed=1, trials=min(differential.trials, 100))
    assert result.error is None, result.error
    assert result.disagreement is not None and result.agreed < result.trials


CAUGHT_ON_0_34 = (
    "kv-cache-specs:merge-drops-window",
    "flash-attn-metadata:any-block-size",
    "flashinfer-metadata:group-window-only",
    "flashinfer-metadata:any-head-size",
)
"""Breakages vLLM 0.34.0 still sees beyond its named deviations. The others touch what 0.34.0
changed: the code it replaced, the slot-mapping buffer builders no longer write, MLA head sizes
(0.34.0 accepts 512 too, as the broken reference does)."""


@pytest.fixture(scope="module")
def vllm_0_34() -> Generator[tuple[VllmCode, list[FoundDeviation]], None, None]:
    tree = fetch_vllm_source("0.34.0")
    found = [f for d in DIFFERENTIALS for f in find_deviations(tree, d.name, d.deviations)]
    compared = {d.name for d in DIFFERENTIALS} - {
        f.differential for f in found if f.deviation.paths is None
    }
    modules = sorted({m for d in DIFFERENTIALS if d.name in compared for m in d.vllm_modules(tree)})
    with open_vllm(tree, modules) as code:
        yield code, found


@pytest.mark.parametrize(
    ("name", "owner", "attribute", "broken"),
    [(b[0], *b[2:]) for b in BREAKAGES if f"{b[0]}:{b[1]}" in CAUGHT_ON_0_34],
    ids=[f"{b[0]}:{b[1]}" for b in BREAKAGES if f"{b[0]}:{b[1]}" in CAUGHT_ON_0_34],
)
def test_a_broken_reference_is_caught_beyond_0_34_deviations(
    vllm_0_34: tuple[VllmCode, list[FoundDeviation]],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    owner: object,
    attribute: str,
    broken: Callable[..., Any],
) -> None:
    vllm, found = vllm_0_34
    differential: Differential[Any] = BY_NAME[name]
    named = [f for f in found if f.differential == name]
    intact = run_differential(differential, vllm, seed=1, trials=20, deviations=named)
    assert intact.ok, intact.disagreement
    monkeypatch.setattr(owner, attribute, broken)
    trials = min(differential.trials, 100)
    result = run_differential(differential, vllm, seed=1, trials=trials, deviations=named)
    assert result.error is None, result.error
    assert result.disagreement is not None and result.agreed < result.trials
