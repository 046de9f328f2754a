"""The API era of a metadata builder, read from its signatures (never from a version string).

* :attr:`Era.RUNNER` (vLLM 0.9.x): ``__init__(runner, kv_cache_spec, block_table)`` and
  ``build(num_reqs, num_actual_tokens, max_query_len, common_prefix_len, common_attn_metadata)``;
  the builder reads the model runner's buffers and may reorder the batch (``reorder_batch``).
* :attr:`Era.SPEC` (vLLM 0.10 through 0.34): ``__init__(kv_cache_spec, layer_names, vllm_config,
  device)`` and ``build(common_prefix_len, common_attn_metadata, fast_build=False)``; everything
  per step comes in ``CommonAttentionMetadata``.

A git checkout between releases is judged the same way: what its builder accepts decides.
"""

from __future__ import annotations

import enum
import inspect
from typing import Any

from harness.errors import HarnessError


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


def parameter_names(function: Any) -> tuple[str, ...]:
    """Positional-or-keyword parameter names of ``function`` after ``self``."""
    names = [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return tuple(names[1:] if names[:1] == ["self"] else names)


def builder_era(builder_cls: type[Any]) -> Era:
    """The era whose constructor and ``build`` parameters lead ``builder_cls``'s own."""
    init = parameter_names(builder_cls.__init__)
    build = parameter_names(builder_cls.build)
    for era, (want_init, want_build) in _SIGNATURES.items():
        if init[: len(want_init)] == want_init and build[: len(want_build)] == want_build:
            return era
    raise OutsideEras(
        f"{builder_cls.__module__}.{builder_cls.__qualname__} has __init__({', '.join(init)}) "
        f"and build({', '.join(build)}), which match neither supported era "
        f"(vLLM 0.9: __init__({', '.join(_SIGNATURES[Era.RUNNER][0])}); vLLM 0.10-0.34: "
        f"__init__({', '.join(_SIGNATURES[Era.SPEC][0])})); the engine adapter cannot drive it: "
        "use a tree of a supported era, or teach harness/adapter/era.py and drive.py the new one"
    )
