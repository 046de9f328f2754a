"""ci/install_guard.py: ``make install`` refuses a CUDA torch unless the gpu extra is asked for."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ci import install_guard

ROOT = Path(__file__).resolve().parents[2]


def _report(*names: str) -> dict[str, Any]:
    return {"install": [{"metadata": {"name": n, "version": "1.0"}} for n in names]}


def test_a_cuda_torch_is_refused_without_the_gpu_extra() -> None:
    report = _report("torch", "nvidia-cublas-cu12", "nvidia_cudnn_cu12", "numpy")
    assert install_guard.cuda_wheels(report) == [
        "nvidia-cublas-cu12==1.0",
        "nvidia-cudnn-cu12==1.0",
    ]
    why = install_guard.refusal("engine,eval,dev", report)
    assert why is not None and why.startswith("make install: refusing to pull a CUDA build")
    assert "\n" not in why
    assert install_guard.refusal("engine,eval,gpu,dev", report) is None


def test_a_cpu_install_and_nvml_bindings_pass() -> None:
    assert install_guard.refusal("engine,eval,dev", _report("torch", "numpy")) is None
    assert install_guard.refusal("engine", _report("nvidia-ml-py")) is None
    assert install_guard.refusal("engine", {}) is None


def test_make_install_runs_the_guard_before_installing() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("$(VENV)/.installed-%:", 1)[1].split("\n\n", 1)[0]
    guard = recipe.index("ci/install_guard.py '$(EXTRAS)' -c $(CONSTRAINTS) -e '.[$(EXTRAS)]'")
    install = recipe.index("-m pip install -q -c $(CONSTRAINTS) -e '.[$(EXTRAS)]'")
    assert guard < install


@pytest.mark.slow
@pytest.mark.integration
def test_the_guard_stops_a_real_resolution_that_picks_pypis_cuda_torch(tmp_path: Path) -> None:
    # torch 2.7.0 has no CPU build on disk here: PyPI's Linux wheel is the CUDA one. The dry run
    # resolves it (metadata only) and the guard refuses; nothing is installed.
    if not re.match(r"linux", sys.platform):
        pytest.skip("PyPI's CUDA torch is the Linux wheel")
    done = subprocess.run(
        [sys.executable, str(ROOT / "ci/install_guard.py"), "engine", "torch==2.7.0"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    said = done.stderr.strip().splitlines() or [""]
    if done.returncode not in (0, 1) or said[-1].startswith("ERROR:"):  # pip's own failure
        pytest.skip(
            f"pip cannot resolve torch==2.7.0 here (no index, or none reachable): {said[-1]}"
        )
    assert done.returncode == 1, done.stderr
    assert said[-1].startswith("make install: refusing to pull")
