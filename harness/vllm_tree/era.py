"""The API era of a metadata builder, read from its signatures (never from a version string).

* :attr:`Era.RUNNER` (vLLM 0.9.x): ``__init__(runner, kv_cache_spec, block_table)`` and
  ``build(num_reqs, num_actual_tokens, max_query_len, common_prefix_len, common_attn_metadata)``;
  the builder reads the model runner's buffers and may reorder the batch (``reorder_batch``).
* :attr:`Era.SPEC` (vLLM 0.10 through 0.34): ``__init__(kv_cache_spec, layer_names, vllm_config,
  device)`` and ``build(common_prefix_len, common_attn_metadata, fast_build=False)``; everything
  per step comes in ``CommonAttentionMetadata``.

A git checkout between releases is judged the same way: what its builder accepts decides.
:func:`builder_era` reads a loaded class (the engine adapter, per backend); :func:`tree_era` reads
the tree's ``FlashAttentionMetadataBuilder`` from its text (the differentials, before loading).
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Sequence
from typing import Any

from harness.errors import HarnessError
from harness.vllm_tree.tree import VllmTree

BUILDER = "FlashAttentionMetadataBuilder"
"""The builder every vLLM V1 tree has, whose signatures decide a tree's era."""


class Era(enum.Enum):
    """How a model runner constructs and calls a builder (module docstring)."""

    RUNNER = "vLLM 0.9 (builders take the runner)"
    SPEC = "vLLM 0.10-0.34 (builders take kv_cache_spec, layer_names, vllm_config, device)"


_SIGNATURES = {
    Era.RUNNER: (
        ("runner", "kv_cache_spec", "block_table"),
        (
            "num_reqs",
            "num_actual_tokens",
            "max_query_len",
            "common_prefix_len",
            "common_attn_metadata",
        ),
    ),
    Era.SPEC: (
        ("kv_cache_spec", "layer_names", "vllm_config", "device"),
        ("common_prefix_len", "common_attn_metadata"),
    ),
}


class OutsideEras(HarnessError):
    """A builder whose signatures match no supported era."""


def era_of(init: Sequence[str], build: Sequence[str], subject: str) -> Era:
    """The era whose constructor and ``build`` parameters lead ``init`` and ``build``; else
    :class:`OutsideEras` naming ``subject`` and both eras' signatures."""
    for era, (want_init, want_build) in _SIGNATURES.items():
        if tuple(init[: len(want_init)]) == want_init and tuple(build[: len(want_build)]) == (
            want_build
        ):
            return era
    runner, spec = _SIGNATURES[Era.RUNNER][0], _SIGNATURES[Era.SPEC][0]
    raise OutsideEras(
        f"{subject} has __init__({', '.join(init)}) and build({', '.join(build)}), which match "
        f"neither supported era (vLLM 0.9: __init__({', '.join(runner)}); vLLM 0.10-0.34: "
        f"__init__({', '.join(spec)})): use a tree of a supported era, or teach "
        "harness/vllm_tree/era.py the new one"
    )


def parameter_names(function: Any) -> tuple[str, ...]:
    """Positional-or-keyword parameter names of ``function`` after ``self``."""
    names = [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return tuple(names[1:] if names[:1] == ["self"] else names)


def builder_era(builder_cls: type[Any]) -> Era:
    """The era of a loaded builder class."""
    return era_of(
        parameter_names(builder_cls.__init__),
        parameter_names(builder_cls.build),
        f"{builder_cls.__module__}.{builder_cls.__qualname__}",
    )


def tree_era(tree: VllmTree) -> Era | None:
    """The era of ``tree``'s ``FlashAttentionMetadataBuilder``, read from its text; None when
    the tree has none."""
    module = tree.module_defining(BUILDER)
    if module is None:
        return None
    return era_of(
        tree.parameters(module, f"{BUILDER}.__init__") or [],
        tree.parameters(module, f"{BUILDER}.build") or [],
        f"{tree.label}: {BUILDER} ({tree.location(module, BUILDER)})",
    )
