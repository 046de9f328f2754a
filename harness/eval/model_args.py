"""``harness-ref``'s ``model_args``: the model shape, device and attention backend of one run.

:func:`resolve_model_choice` turns ``pretrained``, ``device``, ``attention_backend``,
``regression`` and ``VLLM_ATTENTION_BACKEND`` into a :class:`ModelChoice` or a one-line
:class:`~harness.errors.HarnessError`, before any work. Backend precedence follows vLLM 0.9.0's
``vllm/attention/selector.py``: ``attention_backend=`` over the environment variable over the
default (FlashInfer). A ``regression=`` of another backend than the one asked for is an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.reference.backends.abstract import AttentionBackend

ENV_VAR = "VLLM_ATTENTION_BACKEND"
PRETRAINED_SHAPES: dict[str, str] = {
    "meta-llama/Llama-3.1-8B": "llama-3.1-8b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "meta-llama/Meta-Llama-3.1-8B": "llama-3.1-8b",
    "meta-llama/Meta-Llama-3.1-8B-Instruct": "llama-3.1-8b",
}
"""Hugging Face model names whose shape a preset of :mod:`harness.reference.config` has."""
GPU_SHAPES = frozenset({"llama-3.1-8b"})
"""Presets too large for the CPU: their default device is ``meta:h100-95``."""
DEFAULT_GPU_DEVICE = "meta:h100-95"
DENSE_BACKENDS = ("FLASHINFER", "FLASH_ATTN")
"""The backends harness-ref's (non-MLA) models can run."""
MAX_SEED = 2**63 - 1
"""The largest seed ``torch.Generator.manual_seed`` takes as a signed 64-bit integer."""
V1_SUFFIX = "_VLLM_V1"
"""vLLM 0.9.0 also names its V1 backends ``FLASHINFER_VLLM_V1``, ``FLASH_ATTN_VLLM_V1``."""


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """What one ``harness-ref`` run is: a model preset on a device with a backend class."""

    preset: str
    """A :data:`harness.reference.config.MODEL_PRESETS` name, e.g. ``llama-3.1-8b``."""
    device: str
    """``cpu`` or ``meta:<profile>``."""
    backend: type[AttentionBackend]
    label: str | None
    """The regression's name (``None`` for the reference backend itself)."""


def check_seed(value: object, name: str = "seed") -> int:
    """``value`` if it is an integer torch and numpy can seed with (0 to 2**63 - 1)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise HarnessError(f"{name} must be an integer from 0 to {MAX_SEED}, got {value!r}")
    return value


def resolve_preset(pretrained: str) -> str:
    """The preset for ``pretrained=``; an unknown name lists the known ones."""
    from harness.reference.config import MODEL_PRESETS

    preset = PRETRAINED_SHAPES.get(pretrained, pretrained)
    if preset not in MODEL_PRESETS:
        raise HarnessError(
            f"pretrained={pretrained!r}: harness-ref does not know this model's shape; "
            f"known: {', '.join(sorted({*MODEL_PRESETS, *PRETRAINED_SHAPES}))}"
        )
    return preset


def resolve_device(device: str | None, preset: str) -> str:
    """``cpu`` or ``meta:<profile>`` (a known profile); the default depends on the model."""
    from harness.memory.devices import get_device_profile

    if device is None:
        return DEFAULT_GPU_DEVICE if preset in GPU_SHAPES else "cpu"
    if device == "cpu":
        if preset in GPU_SHAPES:
            raise HarnessError(
                f"{preset} does not run on the CPU here (16 GB of weights); "
                "use device=meta:PROFILE, e.g. meta:h100-95"
            )
        return device
    if device.startswith("meta:"):
        get_device_profile(device.removeprefix("meta:"))
        return device
    raise HarnessError(
        f"device={device!r}: harness-ref runs on cpu or meta:PROFILE (a simulated GPU, "
        "e.g. meta:h100-95)"
    )


def resolve_attention_backend(
    attention_backend: str | None, environ: Mapping[str, str]
) -> tuple[str, type[AttentionBackend]] | None:
    """``(origin, class)`` of the backend asked for (argument first, then the environment
    variable), or ``None`` when neither names one."""
    from harness.reference.backends import get_attn_backend

    if attention_backend is not None:
        origin, name = f"attention_backend={attention_backend!r}", attention_backend
    elif environ.get(ENV_VAR):
        origin, name = f"{ENV_VAR}={environ[ENV_VAR]!r}", environ[ENV_VAR]
    else:
        return None
    key = name.strip().upper().removesuffix(V1_SUFFIX)
    if key not in DENSE_BACKENDS:
        raise HarnessError(
            f"{origin}: not a backend harness-ref's (non-MLA) models run; "
            f"available: {', '.join(DENSE_BACKENDS)}"
        )
    return origin, get_attn_backend(key)


def resolve_model_choice(
    *,
    pretrained: str,
    device: str | None,
    attention_backend: str | None = None,
    regression: str | None = None,
    backend: type[AttentionBackend] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ModelChoice:
    """The run ``model_args`` describe (module docstring); ``backend`` is a class a caller
    resolved already (``regression`` is then only its label)."""
    from harness.reference.backends.flashinfer import FlashInferBackend
    from harness.reference.backends.mla.common import MLACommonBackend

    preset = resolve_preset(pretrained)
    resolved_device = resolve_device(device, preset)
    asked = resolve_attention_backend(attention_backend, os.environ if environ is None else environ)
    label = regression
    if backend is None and regression is not None:
        from harness.regressions.resolve import resolve_labelled_backend

        label, backend = resolve_labelled_backend(regression)
    if backend is None:
        return ModelChoice(preset, resolved_device, asked[1] if asked else FlashInferBackend, None)
    if issubclass(backend, MLACommonBackend):
        raise HarnessError(
            f"regression={label!r} runs {backend.get_name()}, an MLA backend; "
            "harness-ref's models are not MLA models"
        )
    if asked is not None and not issubclass(backend, asked[1]):
        raise HarnessError(
            f"regression={label!r} runs {backend.get_name()}, not the {asked[1].get_name()} "
            f"that {asked[0]} asks for"
        )
    return ModelChoice(preset, resolved_device, backend, label or backend.__qualname__)
