"""Which API era a vLLM tree's attention builders belong to, decided from their signatures.

Two eras are supported, the two on the package index that the reference is compared with:

- ``RUNNER`` (vLLM 0.9.x): a builder is constructed as ``(runner, kv_cache_spec, block_table)``
  and called as ``build(num_reqs, num_actual_tokens, max_query_len, common_prefix_len,
  common_attn_metadata)``;
- ``SPEC`` (vLLM 0.34.0): constructed as ``(kv_cache_spec, layer_names, vllm_config, device)``
  and called as ``build(common_prefix_len, common_attn_metadata, fast_build)``.

The version string is never consulted: a git checkout between releases is judged by what it
defines. A tree whose ``FlashAttentionMetadataBuilder`` has neither signature is outside both eras
(a clear error, exit 2).
"""

from __future__ import annotations

from enum import Enum

from harness.errors import HarnessError
from harness.fidelity.tree import VllmTree

BUILDER = "FlashAttentionMetadataBuilder"
"""The builder every vLLM V1 tree has, whose signatures decide the era."""


class Era(Enum):
    """An API era of vLLM's attention metadata builders (values: the constructor, ``build``)."""

    RUNNER = (("runner", "kv_cache_spec", "block_table"), ("num_reqs", "num_actual_tokens"))
    SPEC = (
        ("kv_cache_spec", "layer_names", "vllm_config", "device"),
        ("common_prefix_len", "common_attn_metadata"),
    )

    @property
    def example(self) -> str:
        return "vLLM 0.9.x" if self is Era.RUNNER else "vLLM 0.34.0"


def builder_era(tree: VllmTree) -> Era | None:
    """The era of ``tree``'s builders; None when it has no ``FlashAttentionMetadataBuilder``."""
    module = tree.module_defining(BUILDER)
    if module is None:
        return None
    init = tree.parameters(module, f"{BUILDER}.__init__") or []
    build = tree.parameters(module, f"{BUILDER}.build") or []
    for era in Era:
        wanted_init, wanted_build = era.value
        if (
            tuple(init[: len(wanted_init)]) == wanted_init
            and tuple(build[: len(wanted_build)]) == wanted_build
        ):
            return era
    raise HarnessError(
        f"vLLM {tree.version} at {tree.source.root} is outside the supported eras: its {BUILDER} "
        f"takes ({', '.join(init)}) and builds ({', '.join(build)}) "
        f"({tree.location(module, BUILDER)}); supported: "
        + "; ".join(f"({', '.join(e.value[0])}) as in {e.example}" for e in Era)
    )
