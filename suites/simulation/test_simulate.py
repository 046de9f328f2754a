"""The full-scale simulation: the FlashInfer gsm8k OOM reproduced, clean runs completing, replay exact."""

from __future__ import annotations

import json

import pytest

from harness.errors import HarnessError
from harness.memory.ledger import OTHER_SITES, AllocationSite
from harness.memory.sizes import GiB
from harness.reference.backends.abstract import AttentionBackend
from harness.reference.backends.flash_attn import FlashAttentionBackend
from harness.reference.config import get_model_config
from harness.reference.model import build_model, weight_bytes
from harness.regressions.flashinfer_oom import FlashInferOOMBackend
from harness.simulation.simulate import SimulationResult, simulate
from harness.simulation.workload import Workload, gsm8k, tiny

from .variants import ThreadedOOMBackend

JSON_KEYS = {
    "device",
    "capacity_bytes",
    "gpu_memory_utilization",
    "profile_peak_bytes",
    "num_blocks",
    "kv_cache_bytes",
    "steps",
    "peak_bytes",
    "oom",
    "top_allocations",
}


REPORTED_GIB = {"h100-95": 2.12, "b200": 4.50}
"""What vLLM's OOM said it tried to allocate on each card."""


@pytest.fixture(scope="module")
def oom_runs() -> dict[str, SimulationResult]:
    return {
        device: simulate(
            model="llama-3.1-8b",
            device=device,
            workload=gsm8k(),
            backend=FlashInferOOMBackend,
            regression="flashinfer-oom",
            max_steps=2,
        )
        for device in REPORTED_GIB
    }


@pytest.mark.parametrize("device", sorted(REPORTED_GIB))
def test_flashinfer_oom_reproduces_vllms_failure(
    oom_runs: dict[str, SimulationResult], device: str
) -> None:
    result = oom_runs[device]
    reported_gib = REPORTED_GIB[device]
    oom = result.oom
    assert oom is not None, "the regression must run out of memory"
    sizing = result.sizing
    assert sizing is not None
    # The sizing: Llama-3.1-8B's bf16 weights (~14.96 GiB) counted, blocks of 64 KiB per layer.
    assert 14.9 * GiB < sizing.weights_bytes < 15.1 * GiB
    assert sizing.kv_cache_bytes_per_layer == sizing.num_blocks * 64 * 1024
    # The failing allocation is one layer of the KV cache...
    assert oom.nbytes == sizing.kv_cache_bytes_per_layer
    # ...which is what vLLM printed, within 2%: "Tried to allocate 2.12 GiB" / "4.50 GiB".
    assert abs(oom.requested_bytes / GiB - reported_gib) / reported_gib < 0.02
    assert oom.torch_message.startswith("CUDA out of memory. Tried to allocate ")
    assert "GiB. GPU 0 has a total capacity of " in oom.torch_message
    # It names the op and the source line of the regression.
    assert oom.op in {"aten.contiguous.default", "aten.clone.default"}
    assert oom.source is not None and oom.source.path.endswith("regressions/flashinfer_oom.py")
    assert "permute(0, 1, 3, 2, 4)" in oom.source.text
    assert oom.free_bytes < oom.requested_bytes
    assert result.oom_step == 0  # the first step that builds attention metadata
    assert "flashinfer_oom.py" in str(oom) and oom.source.text in str(oom)
    # Live memory at the error, by source line, shows the copies that piled up before it.
    (copies,) = [s for s in result.top_sites if s.source and "flashinfer_oom.py" in s.source]
    assert copies.count >= 4 and copies.largest == sizing.kv_cache_bytes_per_layer
    assert "flashinfer_oom.py" in result.format()
    # ...and the rows account for every byte live at that moment, weights included.
    assert sum(site.nbytes for site in result.top_sites) == oom.allocated_bytes
    (weights,) = [s for s in result.top_sites if s.op == "weights"]
    parameters = weight_bytes_of_llama_8b()  # plus rotary buffers, in 512-byte blocks
    assert parameters <= weights.nbytes < parameters + 1024 * 1024
    # The plot's story: the failing step, event by event, ends with the copies stacked up.
    assert result.focus is not None and result.focus.step == 0
    assert result.focus.events[-1].live_bytes == oom.allocated_bytes


def weight_bytes_of_llama_8b() -> int:
    return weight_bytes(build_model(get_model_config("llama-3.1-8b"), "meta"))


def test_oom_json_names_op_and_source(oom_runs: dict[str, SimulationResult]) -> None:
    data = json.loads(json.dumps(oom_runs["h100-95"].to_dict()))
    assert data.keys() >= JSON_KEYS
    oom = data["oom"]
    assert {"requested_bytes", "free_bytes", "message", "op", "source"} <= oom.keys()
    assert oom["source"].startswith("harness/regressions/flashinfer_oom.py:")
    assert oom["message"].startswith("CUDA out of memory. Tried to allocate 2.1")
    assert oom["step"] == 0
    assert any("flashinfer_oom.py" in (site["source"] or "") for site in data["top_sites"])


def test_layer_replay_keeps_the_regression_exact(oom_runs: dict[str, SimulationResult]) -> None:
    """A layer that keeps memory past its forward is never replayed: same OOM either way."""
    full = simulate(
        model="llama-3.1-8b",
        device="h100-95",
        workload=gsm8k(),
        backend=FlashInferOOMBackend,
        memoize=False,
        max_steps=2,
    )
    replayed = oom_runs["h100-95"]
    assert full.oom is not None and replayed.oom is not None
    assert full.oom.torch_message == replayed.oom.torch_message


def _check_clean(result: SimulationResult, workload: Workload) -> None:
    assert result.oom is None, str(result.oom)
    assert result.sizing is not None
    capacity = result.device.total_memory - result.non_torch_bytes
    assert result.steps, "no step ran"
    assert all(step.peak_bytes <= capacity for step in result.steps)
    assert result.peak_bytes <= capacity
    # Serving steps never go below the KV cache + weights that the sizing left live.
    floor = result.sizing.weights_bytes + result.sizing.kv_cache_bytes
    assert all(step.start_bytes >= floor for step in result.steps)
    del workload


@pytest.mark.parametrize("device", ["h100-95", "b200"])
def test_clean_run_first_steps_fit(device: str) -> None:
    workload = gsm8k()
    result = simulate(model="llama-3.1-8b", device=device, workload=workload, max_steps=2)
    _check_clean(result, workload)
    assert len(result.steps) == 2
    assert result.steps[0].num_tokens == 16384  # all 1319 prompts waiting: a full prefill budget


@pytest.mark.integration
@pytest.mark.parametrize("device", ["h100-95", "b200"])
def test_clean_gsm8k_completes_at_full_scale(device: str) -> None:
    workload = gsm8k()
    result = simulate(model="llama-3.1-8b", device=device, workload=workload)
    _check_clean(result, workload)
    assert result.num_finished == result.num_requests == 1319
    prompt_tokens = sum(r.prompt_len for r in workload.requests)
    assert sum(step.num_tokens for step in result.steps) >= prompt_tokens


def test_a_hybrid_model_cannot_run_on_flashinfer() -> None:
    """vLLM 0.9.0's FlashInfer needs one window for every layer: a clear error, up front."""
    with pytest.raises(HarnessError, match="tiny-hybrid cannot run on FlashInfer"):
        simulate(model="tiny-hybrid", device="a100-40", workload=tiny(), max_steps=1)


@pytest.mark.parametrize(
    ("model", "backend"),
    [("tiny", None), ("tiny-hybrid", FlashAttentionBackend)],  # FlashInfer refuses the hybrid
)
def test_layer_replay_accounts_exactly_like_running_every_layer(
    model: str, backend: type[AttentionBackend] | None
) -> None:
    runs = [
        simulate(
            model=model,
            device="a100-40",
            workload=tiny(),
            backend=backend,
            memoize=memoize,
            max_steps=12,
        )
        for memoize in (True, False)
    ]
    replayed, full = runs
    assert replayed.num_layer_replays > 0 and full.num_layer_replays == 0
    assert replayed.steps == full.steps
    assert replayed.peak_bytes == full.peak_bytes
    assert replayed.sizing == full.sizing


def test_layer_replay_exact_at_full_scale() -> None:
    runs = [
        simulate(model="llama-3.1-8b", device="h100-95", workload=gsm8k(), max_steps=1, memoize=m)
        for m in (True, False)
    ]
    assert runs[0].num_layer_replays >= 2 * 31  # profile_run and one step
    assert runs[0].steps == runs[1].steps
    assert runs[0].sizing == runs[1].sizing


def test_json_has_the_documented_keys() -> None:
    result = simulate(model="tiny", device="a100-40", workload=tiny(), max_steps=3, top_k=3)
    data = json.loads(json.dumps(result.to_dict()))
    assert data.keys() >= JSON_KEYS
    assert data["oom"] is None
    assert data["device"] == "a100-40"
    assert data["steps"] == 3
    assert data["top_allocations"][0]["op"] == "aten.zeros.default"  # a KV cache tensor
    assert data["num_blocks"] > 0
    # Live bytes at the peak by source line: 3 rows, an "other" row, all of the peak.
    sites = data["top_sites"]
    assert len(sites) == 4 and sites[-1]["op"] == OTHER_SITES
    assert sum(site["nbytes"] for site in sites) == data["peak_bytes"]
    assert result.focus is not None and result.focus.peak_bytes == max(
        step.peak_bytes for step in result.steps
    )


def test_no_headroom_means_the_lazy_flashinfer_workspace_does_not_fit() -> None:
    """What vLLM's profiling never measures has to fit in the 1 - gpu_memory_utilization headroom."""
    result = simulate(
        model="tiny",
        device="a100-40",
        workload=tiny(),
        gpu_memory_utilization=0.9975,
        non_torch_bytes=0,
        max_steps=2,
    )
    assert result.oom is not None and result.oom_step == 0
    assert result.oom.source is not None
    assert result.oom.source.path.endswith("backends/flashinfer.py")  # the lazy 256 MiB workspace
    assert result.oom.nbytes == 256 * 1024 * 1024


def test_model_that_does_not_fit_is_a_clean_error() -> None:
    with pytest.raises(HarnessError, match="does not fit"):
        simulate(
            model="llama-3.1-8b", device="h100-95", workload=gsm8k(), gpu_memory_utilization=0.2
        )


def test_bad_utilization_is_rejected() -> None:
    with pytest.raises(HarnessError, match="gpu_memory_utilization"):
        simulate(model="tiny", device="h100-95", workload=tiny(), gpu_memory_utilization=1.5)


def test_allocation_site_line_multiplies_only_equal_sizes() -> None:
    equal = AllocationSite("aten.clone.default", "x.py:1", "", count=5, nbytes=5 * GiB, largest=GiB)
    mixed = AllocationSite("weights", "y.py:2", "", count=3, nbytes=3 * GiB, largest=2 * GiB)
    assert equal.describe().split()[:5] == ["5", "x", "1024.00", "MiB", "="]
    assert "up to" in mixed.describe() and " x " not in mixed.describe()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("backend", [FlashInferOOMBackend, ThreadedOOMBackend])
def test_an_allocation_made_in_another_thread_runs_out_of_memory_too(
    backend: type[AttentionBackend],
) -> None:
    """The KV cache copy in a worker thread does not fit either (its exception ends the thread
    only: the refused allocation still ends the simulation)."""
    result = simulate(
        model="llama-3.1-8b", device="h100-95", workload=gsm8k(), backend=backend, max_steps=1
    )
    assert result.oom is not None, result.format()
    assert result.oom_step == 0 and result.oom.op == "aten.clone.default"
    assert "Tried to allocate 2.12 GiB" in str(result.oom)
    assert "OUT OF MEMORY at step 0" in result.format()
