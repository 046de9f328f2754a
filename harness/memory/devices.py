"""Named GPU profiles with the capacities torch reports for them.

Where only torch's two-decimal figure of a capacity is public, the bytes are it rounded down to
2 MiB (within 5 MiB of the truth).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import HarnessError
from harness.memory.sizes import GiB, KiB, MiB

DEFAULT_NON_TORCH_BYTES = 512 * MiB
"""Estimate of the CUDA context plus library workspaces of a single-GPU torch process.

Not a measured constant: a CUDA context on Hopper/Blackwell takes a few hundred MiB, and vLLM's
profiling logs show the rest varying per setup (``non_torch_memory 1.79GiB`` for Llama-3-8B on an
H100 in vllm-project/vllm#10511, ``0.16GiB`` of non-torch increase in vllm-project/vllm#12126).
Override it per run where a measurement exists (``harness.memory.cuda_probe`` measures it on a GPU).
"""


@dataclass(frozen=True, slots=True)
class DeviceProfile:
    """A GPU model as torch sees it: its total capacity and the memory torch does not manage."""

    name: str
    total_memory: int
    """Bytes; the "total capacity" torch prints in its out-of-memory message."""
    non_torch_bytes: int = DEFAULT_NON_TORCH_BYTES
    """Bytes in use on the device outside torch's caching allocator (CUDA context etc.)."""
    source: str = ""
    """Where ``total_memory`` comes from."""
    multi_processor_count: int | None = None
    """SMs (CUs on ROCm) as torch reports them; None when unknown (the runner then assumes 132)."""

    def __post_init__(self) -> None:
        if self.total_memory <= 0:
            raise HarnessError(f"device profile {self.name!r}: total_memory must be positive")
        if not 0 <= self.non_torch_bytes < self.total_memory:
            raise HarnessError(
                f"device profile {self.name!r}: non_torch_bytes must be in [0, total_memory)"
            )


def _printed(gib: float) -> int:
    """Bytes for a capacity known only from torch's two-decimal GiB figure (2 MiB granular)."""
    return int(gib * GiB) // (2 * MiB) * (2 * MiB)


DEVICE_PROFILES: dict[str, DeviceProfile] = {}
"""All registered profiles by name."""


def register_device_profile(profile: DeviceProfile) -> DeviceProfile:
    """Add ``profile``; a second profile with the same name is an error."""
    if profile.name in DEVICE_PROFILES:
        raise HarnessError(f"device profile {profile.name!r} is already registered")
    DEVICE_PROFILES[profile.name] = profile
    return profile


def get_device_profile(name: str) -> DeviceProfile:
    """The profile called ``name``; unknown names list the available ones."""
    try:
        return DEVICE_PROFILES[name]
    except KeyError:
        available = ", ".join(sorted(DEVICE_PROFILES))
        raise HarnessError(f"unknown device profile {name!r} (available: {available})") from None


# multi_processor_count: the vendors' specifications (A100 108 SMs, H100 SXM/NVL and H200 132,
# B200 148, MI300X 304 CUs).
for _profile in (
    DeviceProfile(
        "a100-40",
        42_298_834_944,  # 39.39 GiB
        source="NVIDIA A100-SXM4-40GB, deviceQuery 'Total amount of global memory: 40339 MBytes "
        "(42298834944 bytes)' (bottlerocket-os/bottlerocket#3873)",
        multi_processor_count=108,
    ),
    DeviceProfile(
        "a100-80",
        _printed(79.15),
        source="A100 80GB, torch OOM 'GPU 0 has a total capacity of 79.15 GiB' (printed in "
        "public OOM reports; nvidia-smi shows 81920MiB, modal-labs/modal-client#2797)",
        multi_processor_count=108,
    ),
    DeviceProfile(
        "h100-80",
        _printed(79.11),
        source="NVIDIA H100 80GB HBM3, torch OOM 'GPU 0 has a total capacity of 79.11 GiB' "
        "(vllm-project/vllm#27508); vLLM logs 'total_gpu_memory 79.22GiB' on another driver "
        "(vllm-project/vllm#10511)",
        multi_processor_count=132,
    ),
    DeviceProfile(
        "h100-95",
        95 * GiB,
        source="the H100 of the FlashInfer gsm8k OOM after vLLM PR #17483: 'GPU 0 has a total "
        "capacity of 95.00 GiB of which 1.01 GiB is free'",
        multi_processor_count=132,
    ),
    DeviceProfile(
        "h200",
        _printed(139.80),
        source="NVIDIA H200 141GB, torch OOM 'GPU 0 has a total capacity of 139.80 GiB' "
        "(several public H200 OOM logs; 139.81 GiB also appears)",
        multi_processor_count=132,
    ),
    DeviceProfile(
        "b200",
        _printed(178.35),
        source="NVIDIA B200, torch OOM 'GPU 0 has a total capacity of 178.35 GiB' (several public "
        "B200 OOM logs; 178.36 GiB also appears)",
        multi_processor_count=148,
    ),
    DeviceProfile(
        "mi300x",
        201_310_208 * KiB,  # 191.98 GiB
        source="AMD Instinct MI300X, rocminfo GLOBAL pool 'Size: 201310208(0xbffc000) KB' "
        "(ROCm/vllm#397)",
        multi_processor_count=304,
    ),
):
    register_device_profile(_profile)
