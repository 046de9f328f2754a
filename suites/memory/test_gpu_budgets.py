"""The memory budgets of the CPU suites on a real GPU (``make test-gpu``; skipped without CUDA)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from budget_scenarios import (
    KV_COPY_BUDGET,
    MLP_BUDGET,
    kv_copy_body,
    kv_copy_setup,
    mlp_body,
    mlp_setup,
)
from plugin_support import _import_lazy_torch_modules  # noqa: F401  # pyright: ignore[reportUnusedImport]

from harness.memory.cuda_probe import CudaPeak, cuda_unavailable_reason, probe
from harness.memory.devices import DeviceProfile
from harness.memory.ledger import Ledger
from harness.memory.sim_allocator import SimulatedDevice, SimulatedOutOfMemoryError
from harness.memory.sizes import GiB, format_size
from harness.memory.tracker import MemoryTracker

REASON = cuda_unavailable_reason()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(REASON is not None, reason=f"needs a CUDA GPU: {REASON}"),
]


def _warm(state: dict[str, Any], body: Any) -> dict[str, Any]:
    """Run the body once so cuBLAS workspaces exist before anything is measured."""
    body(state)
    torch.cuda.synchronize()
    return state


@pytest.fixture
def mlp_cuda() -> dict[str, Any]:
    return _warm(mlp_setup("cuda"), mlp_body)


@pytest.fixture
def kv_cuda() -> dict[str, Any]:
    return _warm(kv_copy_setup("cuda"), kv_copy_body)


@pytest.mark.memory_budget(peak=MLP_BUDGET, device="cuda")
def test_mlp_forward_within_budget_on_cuda(mlp_cuda: dict[str, Any]) -> None:
    assert mlp_body(mlp_cuda).device.type == "cuda"


@pytest.mark.memory_budget(peak=KV_COPY_BUDGET, device="cuda")
def test_kv_layer_copy_within_budget_on_cuda(kv_cuda: dict[str, Any]) -> None:
    assert kv_copy_body(kv_cuda).is_contiguous()


def test_cuda_budget_violation_fails_with_the_allocation(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_over="""
        import pytest
        import torch

        @pytest.mark.memory_budget(peak="8 MiB", device="cuda")
        def test_over():
            x = torch.empty(16 << 20, dtype=torch.uint8, device="cuda")
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "memory budget exceeded on cuda: peak 16.00 MiB*",
            "*measured by torch.cuda.max_memory_allocated*",
            "*16.00 MiB  aten.empty.memory_format*cuda?*at test_over.py:5",
        ]
    )


def test_real_out_of_memory_message_has_the_shape_we_simulate() -> None:
    stats = probe()
    too_big = stats.total_bytes + GiB
    with pytest.raises(torch.OutOfMemoryError) as real:
        torch.empty(too_big, dtype=torch.uint8, device="cuda")
    profile = DeviceProfile("this-gpu", stats.total_bytes, non_torch_bytes=0)
    with (
        pytest.raises(SimulatedOutOfMemoryError) as simulated,
        MemoryTracker(Ledger(capacity=SimulatedDevice(profile)), devices=("meta",)),
    ):
        torch.empty(too_big, dtype=torch.uint8, device="meta")
    shape = re.compile(
        r"^CUDA out of memory\. Tried to allocate (\S+ \S+)\. GPU 0 has a total capacity of "
        r"(\S+ \S+) of which \S+ \S+ is free\. .*Of the allocated memory \S+ \S+ is allocated by "
        r"PyTorch, (?:with .* )?and \S+ \S+ is reserved by PyTorch but unallocated\."
    )
    real_match = shape.match(str(real.value))
    simulated_match = shape.match(simulated.value.torch_message)
    assert real_match is not None, str(real.value)
    assert simulated_match is not None
    assert real_match.groups() == simulated_match.groups()
    assert real_match.group(2) == format_size(stats.total_bytes)


def test_peak_measures_only_the_block(mlp_cuda: dict[str, Any]) -> None:
    keep = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
    with CudaPeak() as peak:
        mlp_body(mlp_cuda)
    assert peak.baseline_bytes >= 32 << 20
    assert 0 < peak.peak_bytes < 32 << 20
    del keep


def test_nvml_sees_memory_outside_torch() -> None:
    pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed (pip install '.[gpu]')")
    stats = probe()
    assert stats.process_bytes is not None, "NVML did not list this process"
    assert stats.non_torch_bytes is not None and stats.non_torch_bytes > 0  # the CUDA context
