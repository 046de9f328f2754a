"""The platform the adapter pretends to be: the choices that decide which path a builder takes.

A builder asks ``current_platform`` for the GPU's compute capability, asks which FlashAttention
version is installed and whether FlashInfer's TRT-LLM kernels can be fetched; each answer picks a
code path. :class:`PlatformOptions` makes every such answer an explicit option with a stated
default; :func:`make_platform` builds ``current_platform`` as a subclass of the tree's own
``vllm.platforms.interface.Platform``, so every question the base class answers (capability
families, pinned memory, ...) is answered by the tree's code from these options.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

DEFAULT_CAPABILITY = (9, 0)
"""An H100 (SM90): where the FlashInfer gsm8k out-of-memory error was reported."""


@dataclass(frozen=True, slots=True)
class PlatformOptions:
    """The platform answers that decide a builder's path (each with its default)."""

    device_capability: tuple[int, int] = DEFAULT_CAPABILITY
    """CUDA compute capability (major, minor); default 9.0 (H100)."""
    flash_attn_version: int = 2
    """The one FlashAttention version reported as installed; default 2 (FA3's ahead-of-time
    scheduler metadata is a CUDA kernel that ``build`` would launch and the adapter cannot run)."""
    num_sms: int = 132
    """Streaming multiprocessors (``num_compute_units``); default an H100 SXM's 132."""
    flashinfer_trtllm: bool = False
    """Whether FlashInfer's TRT-LLM/XQA cubins are available; default no (FlashInfer's native
    kernels plan every batch, the path whose buffers ``build`` fills on the host)."""

    def __post_init__(self) -> None:
        major, minor = self.device_capability
        if not (0 < major < 100 and 0 <= minor < 10):
            raise ValueError(f"device capability {major}.{minor} is not a CUDA capability")
        if self.flash_attn_version not in (2, 3, 4):
            raise ValueError(f"FlashAttention version {self.flash_attn_version} is not 2, 3 or 4")

    def describe(self) -> str:
        major, minor = self.device_capability
        return (
            f"device capability {major}.{minor}, FlashAttention {self.flash_attn_version}, "
            f"FlashInfer TRT-LLM kernels {'on' if self.flashinfer_trtllm else 'off'}"
        )


def parse_capability(text: str) -> tuple[int, int]:
    """``"9.0"`` -> ``(9, 0)``; anything else is a ``ValueError`` naming the expected form."""
    major, dot, minor = text.partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        raise ValueError(f"device capability {text!r}: expected MAJOR.MINOR, e.g. 9.0 or 10.0")
    return int(major), int(minor)


def make_platform(interface: types.ModuleType, options: PlatformOptions) -> Any:
    """``current_platform``: the tree's ``Platform`` as a CUDA device of ``options``."""
    base: type[Any] = interface.Platform
    capability = interface.DeviceCapability(*options.device_capability)
    cuda = interface.PlatformEnum.CUDA

    class AdapterCudaPlatform(base):  # type: ignore[misc]
        """A CUDA platform whose answers come from the adapter's options (tensors stay on CPU)."""

        _enum = cuda
        device_name = "cuda"
        device_type = "cuda"
        dispatch_key = "CUDA"
        ray_device_key = "GPU"
        simple_compile_backend = "inductor"

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            return capability

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return f"adapter-sm{options.device_capability[0]}{options.device_capability[1]}"

        @classmethod
        def num_compute_units(cls, device_id: int = 0) -> int:
            return options.num_sms

        @classmethod
        def is_pin_memory_available(cls) -> bool:
            return False

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return 80 << 30

        @classmethod
        def fp8_dtype(cls) -> Any:
            import torch

            return torch.float8_e4m3fn

        @classmethod
        def is_fp8_fnuz(cls) -> bool:
            return False

    return AdapterCudaPlatform()
