"""Named scenarios: budgets through the marker, exact peaks as golden files (cpu and meta agree)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from budget_scenarios import (
    KV_COPY_BUDGET,
    MLP_BUDGET,
    SCENARIOS,
    kv_copy_body,
    kv_copy_setup,
    mlp_body,
    mlp_setup,
)

from harness.memory.sizes import parse_size
from harness.memory.tracker import MemoryTracker


@pytest.fixture
def mlp_cpu() -> dict[str, Any]:
    return mlp_setup("cpu")


@pytest.fixture
def kv_cpu() -> dict[str, Any]:
    return kv_copy_setup("cpu")


@pytest.mark.memory_budget(peak=MLP_BUDGET, device="cpu")
def test_mlp_forward_within_budget_on_cpu(mlp_cpu: dict[str, Any]) -> None:
    assert mlp_body(mlp_cpu).shape == (256, 1024)


@pytest.mark.memory_budget(peak=KV_COPY_BUDGET, device="cpu")
def test_kv_layer_copy_within_budget_on_cpu(kv_cpu: dict[str, Any]) -> None:
    assert kv_copy_body(kv_cpu).is_contiguous()


@pytest.fixture
def mlp_meta() -> dict[str, Any]:
    return mlp_setup("meta")


@pytest.mark.memory_budget(peak=MLP_BUDGET, device="meta:h100-95")
def test_mlp_forward_within_budget_on_meta(mlp_meta: dict[str, Any]) -> None:
    assert mlp_body(mlp_meta).device.type == "meta"


@pytest.mark.memory_budget(peak="1 GiB", device="meta:h100-95")
def test_meta_body_allocates_on_meta_by_default() -> None:
    assert torch.empty(1 << 20).device.type == "meta"


def _peak_record(tracker: MemoryTracker) -> dict[str, Any]:
    return {
        "peak_bytes": tracker.ledger.peak_bytes,
        "peak_allocations": [
            {"op": a.op, "nbytes": a.nbytes, "shape": list(a.shape), "dtype": str(a.dtype)}
            for a in tracker.ledger.peak_allocations(5)
        ],
    }


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_peak_is_golden_and_device_independent(name: str, golden: Any) -> None:
    scenario = SCENARIOS[name]
    records = {}
    for device in ("cpu", "meta"):
        state = scenario.setup(device)
        with MemoryTracker(devices=(device,)) as tracker:
            scenario.body(state)
        records[device] = _peak_record(tracker)
    assert records["cpu"] == records["meta"]
    assert records["cpu"]["peak_bytes"] <= parse_size(scenario.budget)
    golden.check(f"memory/budgets/{name}", records["cpu"])
