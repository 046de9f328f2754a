"""Turn per-layer KV cache specs and a memory figure into a ``KVCacheConfig``.

Follows vLLM 0.9.0 ``vllm/v1/core/kv_cache_utils.get_kv_cache_config`` in its order: one request of
``max_model_len`` must fit; with ``disable_hybrid_kv_cache_manager`` (the default, 0.9.0's only
mode) sliding layers are unified to full ones; one type gives one group of
``available // page_size // num_layers`` blocks. With the switch off, each type gets its own
group, as vLLM 0.9.1's hybrid manager (every layer owns its tensor here: ``docs/fidelity.md``).
The caller's spec dict is never modified. :func:`kv_cache_config_for_num_blocks` gives a config
of an exact block count.
"""

from __future__ import annotations

import dataclasses

from harness.reference.config import VllmConfig
from harness.reference.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheSpec,
    KVCacheTensor,
    SlidingWindowSpec,
)

GiB = 1 << 30


class InsufficientKVCacheMemoryError(ValueError):
    """The available memory cannot hold one request of ``max_model_len`` tokens."""


def _max_memory_usage_bytes(vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec]) -> int:
    return sum(spec.max_memory_usage_bytes(vllm_config) for spec in kv_cache_spec.values())


def estimate_max_model_len(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec], available_memory: int
) -> int:
    """The longest ``max_model_len`` whose one request fits in ``available_memory`` (0: none), by
    vLLM's binary search (a config per probe instead of vLLM's mutation).
    """
    model_config = vllm_config.model_config

    def fits_in_memory(model_len: int) -> bool:
        probe = dataclasses.replace(
            vllm_config, model_config=dataclasses.replace(model_config, max_model_len=model_len)
        )
        return _max_memory_usage_bytes(probe, kv_cache_spec) <= available_memory

    left, right = 1, model_config.max_model_len
    if not fits_in_memory(left):
        return 0
    result = 1
    while left <= right:
        mid = (left + right) // 2
        if fits_in_memory(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def check_enough_kv_cache_memory(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec], available_memory: int
) -> None:
    """Raise unless one request of ``max_model_len`` tokens fits in ``available_memory``.

    The message is vLLM's; it names the longest model length that would fit, as vLLM 0.9.1 does
    (0.9.0 computes that length too but drops it from its message).
    """
    if available_memory <= 0:
        raise InsufficientKVCacheMemoryError(
            "No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )
    needed = _max_memory_usage_bytes(vllm_config, kv_cache_spec)
    if needed > available_memory:
        max_model_len = vllm_config.model_config.max_model_len
        estimated_max_len = estimate_max_model_len(vllm_config, kv_cache_spec, available_memory)
        estimated_msg = (
            "Based on the available memory, "
            f"the estimated maximum model length is {estimated_max_len}."
            if estimated_max_len > 0
            else ""
        )
        raise InsufficientKVCacheMemoryError(
            "To serve at least one request with the models's max seq len "
            f"({max_model_len}), ({needed / GiB:.2f} GiB KV cache is needed, which is larger "
            f"than the available KV cache memory ({available_memory / GiB:.2f} GiB). "
            f"{estimated_msg} Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine."
        )


def unify_hybrid_kv_cache_specs(kv_cache_spec: dict[str, KVCacheSpec]) -> dict[str, KVCacheSpec]:
    """vLLM 0.9.0's unification: with full AND sliding-window layers, sliding ones become full.

    Each ``SlidingWindowSpec`` turns into a ``FullAttentionSpec`` carrying its ``sliding_window``
    (blocks for every token, attention still over the window). Returns a new dict.
    """
    specs = dict(kv_cache_spec)
    has_full = any(isinstance(spec, FullAttentionSpec) for spec in specs.values())
    has_sliding = any(isinstance(spec, SlidingWindowSpec) for spec in specs.values())
    if has_full and has_sliding:
        for name, spec in specs.items():
            if isinstance(spec, SlidingWindowSpec):
                specs[name] = FullAttentionSpec(**dataclasses.asdict(spec))
    return specs


def is_kv_cache_type_uniform(kv_cache_spec: dict[str, KVCacheSpec]) -> bool:
    """Whether every layer has the same ``type_id`` (False for no layers, as vLLM)."""
    return len({spec.type_id for spec in kv_cache_spec.values()}) == 1


def is_kv_cache_page_size_uniform(kv_cache_spec: dict[str, KVCacheSpec]) -> bool:
    """Whether every layer has the same ``page_size_bytes``."""
    return len({spec.page_size_bytes for spec in kv_cache_spec.values()}) == 1


def group_layers_by_type_id(kv_cache_spec: dict[str, KVCacheSpec]) -> list[list[str]]:
    """Layer names grouped by ``type_id``, groups in order of first appearance."""
    groups: dict[str, list[str]] = {}
    for layer_name, spec in kv_cache_spec.items():
        groups.setdefault(spec.type_id, []).append(layer_name)
    return list(groups.values())


def create_kv_cache_group_specs(
    kv_cache_spec: dict[str, KVCacheSpec], grouped_layer_names: list[list[str]]
) -> list[KVCacheGroupSpec]:
    """One ``KVCacheGroupSpec`` per group, its spec merged from its layers' specs."""
    groups: list[KVCacheGroupSpec] = []
    for layer_names in grouped_layer_names:
        layer_specs = [kv_cache_spec[name] for name in layer_names]
        groups.append(KVCacheGroupSpec(layer_names, layer_specs[0].merge(layer_specs)))
    return groups


def get_num_blocks(
    vllm_config: VllmConfig, num_layers: int, available_memory: int, page_size: int
) -> int:
    """``available // page_size // num_layers`` (at least 0), or ``num_gpu_blocks_override``."""
    override = vllm_config.cache_config.num_gpu_blocks_override
    if override is not None:
        return override
    return max(int(available_memory // page_size // num_layers), 0)


def _layout(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec]
) -> tuple[dict[str, KVCacheSpec], list[list[str]]]:
    """The (possibly unified) specs and the layer names of each group; unsupported layouts raise."""
    hybrid_manager = not vllm_config.scheduler_config.disable_hybrid_kv_cache_manager
    specs = dict(kv_cache_spec) if hybrid_manager else unify_hybrid_kv_cache_specs(kv_cache_spec)
    if is_kv_cache_type_uniform(specs):
        return specs, [list(specs)]
    if hybrid_manager and is_kv_cache_page_size_uniform(specs):
        return specs, group_layers_by_type_id(specs)
    types = sorted({spec.type_id for spec in specs.values()})
    raise NotImplementedError(
        f"KV cache layout not supported for layers of types {types}: "
        + (
            "the hybrid KV cache manager needs one page size for every layer"
            if hybrid_manager
            else "with disable_hybrid_kv_cache_manager=True (vLLM 0.9.0) every layer must "
            "have one type after unify_hybrid_kv_cache_specs"
        )
    )


def _kv_cache_config(
    specs: dict[str, KVCacheSpec], grouped_layer_names: list[list[str]], num_blocks: int
) -> KVCacheConfig:
    page_size = next(iter(specs.values())).page_size_bytes
    return KVCacheConfig(
        num_blocks=num_blocks,
        tensors={name: KVCacheTensor(size=page_size * num_blocks) for name in specs},
        kv_cache_groups=create_kv_cache_group_specs(specs, grouped_layer_names),
    )


def get_kv_cache_config(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec], available_memory: int
) -> KVCacheConfig:
    """Size and lay out the KV cache of the layers in ``kv_cache_spec`` in ``available_memory``."""
    check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory)
    specs, grouped_layer_names = _layout(vllm_config, kv_cache_spec)
    page_size = next(iter(specs.values())).page_size_bytes
    num_blocks = get_num_blocks(vllm_config, len(specs), available_memory, page_size)
    return _kv_cache_config(specs, grouped_layer_names, num_blocks)


def kv_cache_config_for_num_blocks(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec], num_blocks: int
) -> KVCacheConfig:
    """The layout :func:`get_kv_cache_config` would give, with exactly ``num_blocks`` blocks (which
    must hold one request of ``max_model_len``; ``num_gpu_blocks_override`` does not apply).
    """
    specs, grouped_layer_names = _layout(vllm_config, kv_cache_spec)
    page_size = next(iter(specs.values())).page_size_bytes
    check_enough_kv_cache_memory(vllm_config, kv_cache_spec, num_blocks * page_size * len(specs))
    return _kv_cache_config(specs, grouped_layer_names, num_blocks)
