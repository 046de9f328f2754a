"""Turn per-layer KV cache specs and a memory figure into a ``KVCacheConfig``.

Follows vLLM 0.9.0 ``vllm/v1/core/kv_cache_utils.get_kv_cache_config``: layers are grouped by
``type_id``, every group must have the same page size, and the available memory is divided evenly
over the layers: ``num_blocks = available_memory // page_size // num_layers``. One difference:
vLLM 0.9.0 lets layers of different groups share tensors; here every layer owns its tensor, which
uses the same bytes for a uniform model and keeps the runner simple.

Tools that need a KV cache of an exact size (scenarios, the scaling detector, tests) ask for it
with :func:`kv_cache_config_for_num_blocks` instead of computing a memory figure that divides back.
"""

from __future__ import annotations

from harness.reference.config import VllmConfig
from harness.reference.kv_cache_interface import (
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheSpec,
    KVCacheTensor,
)

GiB = 1 << 30


class InsufficientKVCacheMemoryError(ValueError):
    """The available memory cannot hold one request of ``max_model_len`` tokens."""


def check_enough_kv_cache_memory(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec], available_memory: int
) -> None:
    """Raise unless one request of ``max_model_len`` tokens fits in ``available_memory``."""
    if not kv_cache_spec:
        return
    if available_memory <= 0:
        raise InsufficientKVCacheMemoryError(
            "No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )
    needed = sum(spec.max_memory_usage_bytes(vllm_config) for spec in kv_cache_spec.values())
    if needed > available_memory:
        max_model_len = vllm_config.model_config.max_model_len
        raise InsufficientKVCacheMemoryError(
            f"To serve at least one request with the model's max seq len ({max_model_len}), "
            f"{needed / GiB:.2f} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({available_memory / GiB:.2f} GiB). Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len`."
        )


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
    return [
        KVCacheGroupSpec(
            layer_names=layer_names,
            kv_cache_spec=KVCacheSpec.merge([kv_cache_spec[name] for name in layer_names]),
        )
        for layer_names in grouped_layer_names
    ]


def get_kv_cache_config(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec], available_memory: int
) -> KVCacheConfig:
    """Size and lay out the KV cache of the layers in ``kv_cache_spec`` in ``available_memory``."""
    check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory)
    page_size = _page_size(kv_cache_spec)
    num_layers = max(len(kv_cache_spec), 1)
    num_blocks = max(int(available_memory // page_size // num_layers), 0)
    return _kv_cache_config(kv_cache_spec, page_size, num_blocks)


def kv_cache_config_for_num_blocks(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, KVCacheSpec], num_blocks: int
) -> KVCacheConfig:
    """The layout :func:`get_kv_cache_config` would give, with exactly ``num_blocks`` blocks.

    The same check applies: the blocks must hold one request of ``max_model_len`` tokens.
    """
    page_size = _page_size(kv_cache_spec)
    check_enough_kv_cache_memory(
        vllm_config, kv_cache_spec, num_blocks * page_size * len(kv_cache_spec)
    )
    return _kv_cache_config(kv_cache_spec, page_size, num_blocks)


def _page_size(kv_cache_spec: dict[str, KVCacheSpec]) -> int:
    page_sizes = {spec.page_size_bytes for spec in kv_cache_spec.values()}
    if len(page_sizes) > 1:
        raise NotImplementedError(
            f"KV cache groups with different page sizes are not supported: {sorted(page_sizes)}"
        )
    return page_sizes.pop() if page_sizes else 1


def _kv_cache_config(
    kv_cache_spec: dict[str, KVCacheSpec], page_size: int, num_blocks: int
) -> KVCacheConfig:
    return KVCacheConfig(
        num_blocks=num_blocks,
        tensors={name: KVCacheTensor(size=page_size * num_blocks) for name in kv_cache_spec},
        kv_cache_groups=create_kv_cache_group_specs(
            kv_cache_spec, group_layers_by_type_id(kv_cache_spec)
        ),
    )
