"""harness.memory.devices: GPU capacities as torch prints them."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.memory.devices import (
    DEVICE_PROFILES,
    DeviceProfile,
    get_device_profile,
    register_device_profile,
)
from harness.memory.sizes import GiB, format_size

# What torch prints as "GPU 0 has a total capacity of ..." for each profile.
PRINTED = {
    "a100-40": "39.39 GiB",
    "a100-80": "79.15 GiB",
    "h100-80": "79.11 GiB",
    "h100-95": "95.00 GiB",
    "h200": "139.80 GiB",
    "b200": "178.35 GiB",
    "mi300x": "191.98 GiB",
}


def test_required_profiles_exist() -> None:
    assert set(PRINTED) <= set(DEVICE_PROFILES)


@pytest.mark.parametrize(("name", "printed"), sorted(PRINTED.items()))
def test_capacity_prints_like_torch(name: str, printed: str) -> None:
    profile = get_device_profile(name)
    assert format_size(profile.total_memory) == printed
    assert profile.source, f"{name} must cite where its capacity comes from"
    assert 0 < profile.non_torch_bytes < profile.total_memory // 10


def test_h100_95_is_exactly_95_gib() -> None:
    assert get_device_profile("h100-95").total_memory == 95 * GiB


def test_unknown_profile_lists_available_names() -> None:
    with pytest.raises(HarnessError, match="unknown device profile 'h100-96'") as info:
        get_device_profile("h100-96")
    for name in PRINTED:
        assert name in str(info.value)


def test_duplicate_registration_is_rejected() -> None:
    with pytest.raises(HarnessError, match="already registered"):
        register_device_profile(DeviceProfile("h100-95", 1 * GiB))
    assert DEVICE_PROFILES["h100-95"].total_memory == 95 * GiB


@pytest.mark.parametrize(("total", "non_torch"), [(0, 0), (GiB, GiB), (GiB, -1)])
def test_profile_invariants(total: int, non_torch: int) -> None:
    with pytest.raises(HarnessError):
        DeviceProfile("bad", total, non_torch)


def test_gpu_profiles_know_their_sm_count() -> None:
    """The cascade heuristic reads it (vLLM: ``multi_processor_count``); a B200 is not an H100."""
    counts = {name: DEVICE_PROFILES[name].multi_processor_count for name in ("h100-95", "b200")}
    assert counts == {"h100-95": 132, "b200": 148}
    assert all(p.multi_processor_count for p in DEVICE_PROFILES.values())
