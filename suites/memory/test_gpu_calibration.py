"""Calibration: the tracker's peak on ``meta`` against torch's ``max_memory_allocated`` on CUDA.

The prediction is what the simulator does (same ops on ``meta``, live storage bytes); the
measurement is the peak of torch's caching allocator above the bytes allocated before the block.
The ratio is printed and recorded as a test property; it must stay within 10%.
"""

from __future__ import annotations

import pytest
import torch
from budget_scenarios import SCENARIOS

from harness.memory.cuda_probe import CudaPeak, cuda_unavailable_reason, probe
from harness.memory.devices import DeviceProfile
from harness.memory.ledger import Ledger
from harness.memory.sim_allocator import SimulatedDevice
from harness.memory.tracker import MemoryTracker

REASON = cuda_unavailable_reason()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(REASON is not None, reason=f"needs a CUDA GPU: {REASON}"),
]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_predicted_peak_matches_measured(
    name: str, record_property: pytest.RecordProperty, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = SCENARIOS[name]

    meta_state = scenario.setup("meta")
    with MemoryTracker(devices=("meta",)) as tracker:
        scenario.body(meta_state)
    predicted = tracker.ledger.peak_bytes

    simulated = SimulatedDevice(DeviceProfile("this-gpu", probe().total_bytes, non_torch_bytes=0))
    with MemoryTracker(Ledger(capacity=simulated), devices=("meta",)) as blocks:
        scenario.body(meta_state)
    predicted_blocks = blocks.ledger.peak_bytes  # 512-byte rounded, as torch counts

    cuda_state = scenario.setup("cuda")
    scenario.body(cuda_state)  # warm-up: cuBLAS workspaces are allocated once, before measuring
    torch.cuda.synchronize()
    with CudaPeak() as peak:
        scenario.body(cuda_state)
    measured = peak.peak_bytes

    ratio = measured / predicted
    ratio_blocks = measured / predicted_blocks
    record_property("predicted_bytes", predicted)
    record_property("measured_bytes", measured)
    record_property("ratio", round(ratio, 4))
    with capsys.disabled():
        print(
            f"\n[calibration] {name} on {torch.cuda.get_device_name()}: predicted {predicted} B "
            f"(blocks {predicted_blocks} B), measured {measured} B, ratio {ratio:.4f} "
            f"(vs blocks {ratio_blocks:.4f})"
        )
    assert 0.9 <= ratio <= 1.1, f"{name}: measured/predicted = {ratio:.4f}"
    assert 0.9 <= ratio_blocks <= 1.1
