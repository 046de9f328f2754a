"""The --plot PNG."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.memory.plot import check_plot_path, plot_simulation
from harness.memory.simulate import simulate
from harness.memory.workload import tiny

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_plot_is_written(tmp_path: Path) -> None:
    result = simulate(model="tiny", device="a100-40", workload=tiny(), max_steps=5)
    out = plot_simulation(result, tmp_path / "run.png")
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert len(data) > 10_000


def test_plot_marks_an_oom(tmp_path: Path) -> None:
    # ~100 MiB of headroom: FlashInfer's lazily created 256 MiB workspace cannot fit.
    result = simulate(
        model="tiny", device="a100-40", workload=tiny(), gpu_memory_utilization=0.9975, max_steps=2
    )
    assert result.oom is not None
    out = plot_simulation(result, tmp_path / "oom.png")
    assert out.read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("name", ["run.jpg", "missing-dir/run.png"])
def test_bad_plot_paths_are_clean_errors(tmp_path: Path, name: str) -> None:
    with pytest.raises(HarnessError):
        check_plot_path(tmp_path / name)
