"""KV cache specs, grouping and sizing against vLLM's ``kv_cache_interface`` and ``kv_cache_utils``.

Layers are drawn from a few shapes so that uniform models (the common case), full + sliding
hybrids, several windows, MLA and mixed page sizes all occur. Grouping is compared with
``disable_hybrid_kv_cache_manager=True`` (vLLM 0.9.0 has no other mode).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import torch

from harness.fidelity.deviation import Deviation
from harness.fidelity.differential import Differential, modules_defining
from harness.fidelity.vllm import VllmCode
from harness.reference import kv_cache_interface as ref_specs
from harness.reference import kv_cache_utils as ref_utils
from harness.reference.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from harness.vllm_tree.tree import Location, VllmTree

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class LayerSpec:
    """One layer's KV cache spec, independent of either side's classes."""

    kind: str  # "full", "sliding" or "full-window" (a FullAttentionSpec carrying a window)
    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: str
    use_mla: bool = False
    window: int | None = None


@dataclass(frozen=True)
class SizingCase:
    """Layers, limits and memory for one ``get_kv_cache_config`` call."""

    layers: tuple[LayerSpec, ...]
    max_model_len: int
    max_num_batched_tokens: int
    available_memory: int
    num_gpu_blocks_override: int | None


def _random_layer(rng: np.random.Generator, shapes: list[LayerSpec]) -> LayerSpec:
    base = shapes[int(rng.integers(len(shapes)))]
    roll = rng.random()
    if base.use_mla or roll < 0.5:
        return base
    window = int(rng.choice([4, 8, 32, 100]))
    return replace(base, kind="sliding" if roll < 0.85 else "full-window", window=window)


def _random_shape(rng: np.random.Generator) -> LayerSpec:
    use_mla = bool(rng.random() < 0.15)
    return LayerSpec(
        kind="full",
        block_size=int(rng.choice([1, 16, 32])),
        num_kv_heads=1 if use_mla else int(rng.choice([1, 2, 8])),
        head_size=576 if use_mla else int(rng.choice([64, 128])),
        dtype=str(rng.choice(list(DTYPES))),
        use_mla=use_mla,
    )


def generate_sizing(rng: np.random.Generator) -> SizingCase:
    """A model of 1-6 layers drawn from 1-2 shapes, limits, and memory around what it needs."""
    shapes = [_random_shape(rng) for _ in range(1 if rng.random() < 0.7 else 2)]
    layers = tuple(_random_layer(rng, shapes) for _ in range(int(rng.integers(1, 7))))
    max_model_len = int(rng.choice([16, 100, 1000, 4096]))
    page = max(
        (2 - lay.use_mla) * lay.block_size * lay.num_kv_heads * lay.head_size * 4 for lay in layers
    )
    needed = page * len(layers) * (max_model_len // 16 + 2)
    scale = rng.choice(
        [-0.5, 0.0, 0.3, 0.999, 1.0, 1.5, 40.0], p=[0.05, 0.05, 0.1, 0.1, 0.1, 0.2, 0.4]
    )
    available = int(needed * scale)
    return SizingCase(
        layers=layers,
        max_model_len=max_model_len,
        max_num_batched_tokens=int(rng.choice([8, 64, 512])),
        available_memory=available,
        num_gpu_blocks_override=None if rng.random() < 0.8 else int(rng.integers(0, 1000)),
    )


def shrink_sizing(case: SizingCase) -> Iterator[SizingCase]:
    """Fewer layers, then simpler layers, then rounder numbers."""
    for i in range(len(case.layers)):
        if len(case.layers) > 1:
            yield replace(case, layers=case.layers[:i] + case.layers[i + 1 :])
    for i, layer in enumerate(case.layers):
        simpler = replace(layer, num_kv_heads=1, dtype="float32")
        if simpler != layer:
            yield replace(case, layers=(*case.layers[:i], simpler, *case.layers[i + 1 :]))
    if case.num_gpu_blocks_override is not None:
        yield replace(case, num_gpu_blocks_override=None)
    if case.max_model_len > 16:
        yield replace(case, max_model_len=16)


def _layer_names(case: SizingCase) -> list[str]:
    return [f"model.layers.{i}.self_attn.attn" for i in range(len(case.layers))]


def make_spec(module: Any, layer: LayerSpec) -> Any:
    """``layer``'s spec from ``module``'s classes, built by keyword. MLA is ``use_mla=True`` where
    the spec has that field (vLLM 0.9.0, the reference); a tree without it has an MLA class
    (vLLM 0.34.0's ``MLAAttentionSpec``, a ``FullAttentionSpec``)."""
    cls = module.SlidingWindowSpec if layer.kind == "sliding" else module.FullAttentionSpec
    kwargs: dict[str, Any] = {
        "block_size": layer.block_size,
        "num_kv_heads": layer.num_kv_heads,
        "head_size": layer.head_size,
        "dtype": DTYPES[layer.dtype],
        "sliding_window": layer.window,
    }
    if "use_mla" in {f.name for f in dataclasses.fields(cls)}:
        kwargs["use_mla"] = layer.use_mla
    elif layer.use_mla:
        cls = module.MLAAttentionSpec if layer.kind != "sliding" else module.SlidingWindowMLASpec
    return cls(**kwargs)


REFERENCE_FIELDS = frozenset(
    f.name
    for cls in (ref_specs.FullAttentionSpec, ref_specs.SlidingWindowSpec)
    for f in dataclasses.fields(cls)
)
"""The spec fields the reference has (vLLM 0.9.0's)."""
MLA_CLASS = "MLAAttentionSpec"


def at_default(f: dataclasses.Field[Any], value: object) -> bool:
    """Whether ``value`` is field ``f``'s declared default."""
    if f.default is not dataclasses.MISSING:
        return bool(value == f.default)
    if f.default_factory is not dataclasses.MISSING:
        return bool(value == f.default_factory())
    return False


def _spec_view(spec: Any) -> dict[str, Any]:
    """A spec's class and fields as vLLM 0.9.0 names them: MLA is ``use_mla`` on a
    ``FullAttentionSpec``; a field the reference does not have shows only when it is not at its
    default (a feature in use that the reference does not model)."""
    mla = any(c.__name__ == MLA_CLASS for c in type(spec).__mro__)
    fields = {
        f.name: getattr(spec, f.name)
        for f in dataclasses.fields(spec)
        if f.name in REFERENCE_FIELDS or not at_default(f, getattr(spec, f.name))
    }
    name = type(spec).__name__
    if "use_mla" not in fields:  # a tree with an MLA class: the 0.9.0 view of it
        fields["use_mla"] = mla
        name = "FullAttentionSpec" if name == MLA_CLASS else name
    return {"class": name, **fields}


def _config_view(config: Any) -> dict[str, Any]:
    return {
        "num_blocks": config.num_blocks,
        "tensors": {name: tensor.size for name, tensor in config.tensors.items()},
        "kv_cache_groups": [
            {"layer_names": g.layer_names, "kv_cache_spec": _spec_view(g.kv_cache_spec)}
            for g in config.kv_cache_groups
        ],
    }


def _vllm_config(case: SizingCase) -> SimpleNamespace:
    """The ``VllmConfig`` fields vLLM's sizing reads. One rank, and one batch in flight
    (``max_in_flight_tokens``, vLLM 0.34.0): the reference schedules synchronously, where 0.34.0
    turns async scheduling on by default (a named deviation)."""
    return SimpleNamespace(
        model_config=SimpleNamespace(max_model_len=case.max_model_len),
        scheduler_config=SimpleNamespace(max_num_batched_tokens=case.max_num_batched_tokens),
        cache_config=SimpleNamespace(
            block_size=case.layers[0].block_size,
            num_gpu_blocks_override=case.num_gpu_blocks_override,
        ),
        parallel_config=SimpleNamespace(decode_context_parallel_size=1),
        max_in_flight_tokens=case.max_num_batched_tokens,
    )


def reference_config(case: SizingCase) -> VllmConfig:
    """The reference's config for ``case`` (vLLM 0.9.0's grouping)."""
    return VllmConfig(
        model_config=ModelConfig(max_model_len=case.max_model_len),
        cache_config=CacheConfig(
            block_size=case.layers[0].block_size,
            num_gpu_blocks_override=case.num_gpu_blocks_override,
        ),
        scheduler_config=SchedulerConfig(
            max_num_batched_tokens=case.max_num_batched_tokens,
            max_model_len=case.max_model_len,
            disable_hybrid_kv_cache_manager=True,
        ),
    )


# The insufficient-memory message: the reference names the estimated maximum model length as vLLM
# 0.9.1 does (docs/fidelity.md); 0.9.0 computes it but drops the number. The estimate itself is
# compared on its own (``estimated_max_model_len``); the messages are compared without it.
_ESTIMATE_OURS = re.compile(
    r"Based on the available memory, the estimated maximum model length is \d+\."
)
_ESTIMATE_VLLM_0_9_0 = " Based on the available memory,"


def _without_estimate(outcome: Any) -> Any:
    if isinstance(outcome, Exception):
        message = " ".join(str(a) for a in outcome.args)
        message = _ESTIMATE_OURS.sub("", message).replace(_ESTIMATE_VLLM_0_9_0, "")
        return type(outcome)(message)
    return outcome


def _sizing(specs_module: Any, utils: Any, config: Any, case: SizingCase) -> object:
    """``get_kv_cache_config`` and ``estimate_max_model_len`` of one side on ``case``."""
    names = _layer_names(case)

    def specs() -> dict[str, Any]:  # fresh for each call: vLLM's may modify the dict
        return {
            n: make_spec(specs_module, layer) for n, layer in zip(names, case.layers, strict=True)
        }

    try:
        view: object = _config_view(
            utils.get_kv_cache_config(config, specs(), case.available_memory)
        )
    except (ValueError, AssertionError, NotImplementedError) as exc:
        view = _without_estimate(exc)
    estimate = (
        utils.estimate_max_model_len(config, specs(), case.available_memory)
        if case.available_memory > 0
        else None
    )
    return {"kv_cache_config": view, "estimated_max_model_len": estimate}


def sizing_vllm(vllm: VllmCode, case: SizingCase) -> object:
    """vLLM's ``get_kv_cache_config`` and ``estimate_max_model_len`` on ``case``."""
    utils = vllm.module_defining("get_kv_cache_config")
    return _sizing(vllm.module_defining("FullAttentionSpec"), utils, _vllm_config(case), case)


def sizing_reference(case: SizingCase) -> object:
    """The reference's ``get_kv_cache_config`` and ``estimate_max_model_len`` on ``case``."""
    return _sizing(ref_specs, ref_utils, reference_config(case), case)


def _spec_properties(module: Any, case: SizingCase) -> object:
    config = _vllm_config(case) if module is not ref_specs else reference_config(case)
    rows: list[object] = []
    for layer in case.layers:
        try:
            spec = make_spec(module, layer)
        except (ValueError, AssertionError) as exc:
            rows.append(exc)
            continue
        row = {
            "page_size_bytes": spec.page_size_bytes,
            "max_memory_usage_bytes": spec.max_memory_usage_bytes(config),
        }
        spec_cls: type[object] = type(cast(object, spec))
        if hasattr(spec_cls, "type_id"):  # vLLM 0.34.0 has none (a named deviation)
            row["type_id"] = spec.type_id
        rows.append(row)
    try:
        specs = [make_spec(module, layer) for layer in case.layers]
        merged: object = _spec_view(specs[0].merge(specs))
    except (ValueError, AssertionError) as exc:
        merged = exc
    return {"specs": rows, "merge": merged}


def specs_vllm(vllm: VllmCode, case: SizingCase) -> object:
    """vLLM's page size, type id, memory bound and ``merge`` of each drawn spec."""
    return _spec_properties(vllm.module_defining("FullAttentionSpec"), case)


def specs_reference(case: SizingCase) -> object:
    """The reference's page size, type id, memory bound and ``merge`` of each drawn spec."""
    return _spec_properties(ref_specs, case)


def _show(case: SizingCase) -> str:
    layers = ", ".join(
        f"{lay.kind}(bs={lay.block_size}, kv_heads={lay.num_kv_heads}, head={lay.head_size}, "
        f"{lay.dtype}{', mla' if lay.use_mla else ''}"
        f"{'' if lay.window is None else f', window={lay.window}'})"
        for lay in case.layers
    )
    return (
        f"layers=[{layers}] max_model_len={case.max_model_len} "
        f"max_num_batched_tokens={case.max_num_batched_tokens} "
        f"available_memory={case.available_memory} "
        f"num_gpu_blocks_override={case.num_gpu_blocks_override}"
    )


# Deviations of later vLLM (none in 0.9.0) ------------------------------------------------------


def _spec_module(tree: VllmTree) -> str | None:
    return tree.module_defining("FullAttentionSpec")


def _type_id_removed(tree: VllmTree) -> Location | None:
    module = _spec_module(tree)
    if module is None or tree.find(module, "FullAttentionSpec.type_id") is not None:
        return None
    return tree.location(module, "KVCacheSpec")


def _merge_by_fields(tree: VllmTree) -> Location | None:
    module = _spec_module(tree)
    if module is None or any(
        tree.uses(module, f"{cls}.merge", "type_id") is not None
        for cls in ("KVCacheSpec", "FullAttentionSpec")
    ):
        return None
    return tree.location(module, "FullAttentionSpec.merge")


def _merge_refused_alike(vllm: Any, reference: Any) -> bool:
    """vLLM refuses where the reference refuses too (it checks windows and fields in another
    order, with other messages), or where the reference merges (an ``AssertionError``: fields
    differ that the type id does not show)."""
    if not isinstance(vllm, dict) or "raises" not in vllm:
        return False
    raised = cast("dict[str, Any]", vllm)["raises"]
    ours = cast("dict[str, Any]", reference) if isinstance(reference, dict) else {}
    return "raises" in ours or raised == "AssertionError"


def _head_size_v(tree: VllmTree) -> Location | None:
    module = _spec_module(tree)
    return None if module is None else tree.location(module, "AttentionSpec.head_size_v")


def _in_flight_tokens(tree: VllmTree) -> Location | None:
    module = _spec_module(tree)
    if module is None:
        return None
    return tree.uses(module, "SlidingWindowSpec.max_memory_usage_bytes", "max_in_flight_tokens")


TYPE_ID_REMOVED = Deviation(
    "type-id-removed",
    "removed KVCacheSpec.type_id (layers are grouped by spec class and equal fields)",
    _type_id_removed,
    paths=("specs.*.type_id",),
)
MERGE_BY_FIELDS = Deviation(
    "merge-by-fields",
    "merges a group's specs only when they are of one class with equal fields, not when their "
    "type ids are equal, and words its refusals otherwise",
    _merge_by_fields,
    paths=("merge",),
    explains=_merge_refused_alike,
)
HEAD_SIZE_V = Deviation(
    "head-size-v",
    "added AttentionSpec.head_size_v, the head size of V apart from K's",
    _head_size_v,
    paths=("merge.head_size_v",),
)
IN_FLIGHT_TOKENS = Deviation(
    "sliding-window-in-flight-tokens",
    "sizes a sliding-window layer for max_in_flight_tokens, a batch per concurrent step (two "
    "with async scheduling, which 0.34.0 turns on by default); compared with one, as the "
    "reference schedules",
    _in_flight_tokens,
)


KV_CACHE_SPECS: Differential[SizingCase] = Differential(
    name="kv-cache-specs",
    description="page_size_bytes, type_id, max_memory_usage_bytes and merge of random specs",
    vllm_code="FullAttentionSpec, SlidingWindowSpec (vllm/v1/kv_cache_interface.py)",
    vllm_modules=modules_defining("FullAttentionSpec"),
    generate=generate_sizing,
    run_vllm=specs_vllm,
    run_reference=specs_reference,
    shrink=shrink_sizing,
    show=_show,
    trials=1000,
    deviations=(TYPE_ID_REMOVED, MERGE_BY_FIELDS, HEAD_SIZE_V, IN_FLIGHT_TOKENS),
)


def _planned_for_all_workers(tree: VllmTree) -> Location | None:
    """vLLM 0.34.0 has ``get_kv_cache_configs`` (every worker) and no ``get_kv_cache_config``."""
    if tree.module_defining("get_kv_cache_config") is not None:
        return None
    module = tree.module_defining("get_kv_cache_configs")
    return None if module is None else tree.location(module, "get_kv_cache_configs")


PLANNED_FOR_ALL_WORKERS = Deviation(
    "planned-for-all-workers",
    "replaced get_kv_cache_config with get_kv_cache_configs (every worker's specs, groups from a "
    "pluggable KVCacheConfigBuilder and the spec registry), which holds one null block back in "
    "the memory check and lays layers out in shared backing tensors (KVCacheTensor.layers and "
    "strides) instead of one tensor per layer",
    _planned_for_all_workers,
    paths=None,
)


KV_CACHE_CONFIG: Differential[SizingCase] = Differential(
    name="kv-cache-config",
    description="get_kv_cache_config grouping and sizing (disable_hybrid_kv_cache_manager=True), "
    "num_gpu_blocks_override, errors, estimate_max_model_len",
    vllm_code="get_kv_cache_config, estimate_max_model_len (vllm/v1/core/kv_cache_utils.py)",
    vllm_modules=modules_defining("FullAttentionSpec", "get_kv_cache_config"),
    generate=generate_sizing,
    run_vllm=sizing_vllm,
    run_reference=sizing_reference,
    shrink=shrink_sizing,
    show=_show,
    trials=1000,
    deviations=(PLANNED_FOR_ALL_WORKERS,),
)
