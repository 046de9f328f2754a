"""The --plot PNG: a clean run, an out-of-memory step, and a failure before serving began."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.memory.devices import get_device_profile
from harness.memory.sizes import KiB
from harness.simulation.plot import check_plot_path, plot_simulation
from harness.simulation.simulate import simulate
from harness.simulation.workload import tiny

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _written(path: Path) -> bytes:
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000
    return data


def test_plot_of_a_clean_run(tmp_path: Path) -> None:
    # a low utilisation keeps the block pool small (the tiny model's pages are 2 KiB)
    result = simulate(
        model="tiny", device="a100-40", workload=tiny(), gpu_memory_utilization=0.1, max_steps=5
    )
    _written(plot_simulation(result, tmp_path / "run.png"))


def test_plot_of_an_out_of_memory_step(tmp_path: Path) -> None:
    # ~100 MiB of headroom: FlashInfer's lazily created 256 MiB workspace cannot fit.
    result = simulate(
        model="tiny", device="a100-40", workload=tiny(), gpu_memory_utilization=0.9975, max_steps=2
    )
    assert result.oom is not None and result.focus is not None
    _written(plot_simulation(result, tmp_path / "oom.png"))


def test_plot_of_a_failure_before_serving(tmp_path: Path) -> None:
    capacity = get_device_profile("a100-40").total_memory
    result = simulate(
        model="tiny", device="a100-40", workload=tiny(), non_torch_bytes=capacity - 100 * KiB
    )
    assert result.oom is not None and result.oom_step is None and result.focus is None
    _written(plot_simulation(result, tmp_path / "sizing.png"))


@pytest.mark.parametrize("name", ["run.jpg", "missing-dir/run.png"])
def test_bad_plot_paths_are_clean_errors(tmp_path: Path, name: str) -> None:
    with pytest.raises(HarnessError):
        check_plot_path(tmp_path / name)


def test_checking_a_path_leaves_nothing_behind(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.png"
    check_plot_path(fresh)
    assert not fresh.exists()
    kept = tmp_path / "kept.png"
    kept.write_bytes(b"old")
    check_plot_path(kept)
    assert kept.read_bytes() == b"old"
