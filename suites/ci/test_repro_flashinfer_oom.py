"""scripts/repro_flashinfer_oom.sh on fakes: the GPU it samples is the GPU lm_eval runs on.

A fake interpreter puts stand-ins for pynvml, vllm, torch and lm_eval first on the path: NVML has
GPUs 0-3, and lm_eval prints the device it was given, then torch's OOM message. Nothing here
needs CUDA; what is checked is the wiring (issue 20: NVML's index and CUDA's order may differ).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "repro_flashinfer_oom.sh"
FAKES = {
    "pynvml.py": """
import os, time, types
def nvmlInit():
    time.sleep(float(os.environ.get("FAKE_NVML_INIT_S", "0")))
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetUUID(h): return f"GPU-fake-{h}"
def nvmlDeviceGetMemoryInfo(h): return types.SimpleNamespace(used=(h + 1) << 30, total=80 << 30)
""",
    "vllm/__init__.py": "",
    "torch/__init__.py": "import types\ncuda = types.SimpleNamespace(is_available=lambda: True)\n",
    "lm_eval/__init__.py": "",
    "lm_eval/__main__.py": """
import os
print("CUDA_VISIBLE_DEVICES=" + os.environ["CUDA_VISIBLE_DEVICES"])
print("CUDA_DEVICE_ORDER=" + os.environ["CUDA_DEVICE_ORDER"])
print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.12 GiB.")
raise SystemExit(1)
""",
}


@pytest.mark.parametrize(
    "nvml_init_s",
    [
        pytest.param("0", id="fast-nvml"),
        # A 1 s NVML start, by design: over 2 s of wall clock, so the integration tier.
        pytest.param("1", id="slow-sampler-start", marks=pytest.mark.integration),
    ],
)
def test_lm_eval_gets_the_sampled_gpus_uuid_and_the_report_records_versions(
    tmp_path: Path, nvml_init_s: str
) -> None:
    # A slow NVML start (a loaded machine) must not leave the run unsampled: lm_eval waits
    # for the sampler's first sample.
    fakes = tmp_path / "fakes"
    for name, text in FAKES.items():
        (fakes / name).parent.mkdir(parents=True, exist_ok=True)
        (fakes / name).write_text(text)
    python = tmp_path / "python"
    python.write_text(
        f'#!/bin/sh\nPYTHONPATH={shlex.quote(str(fakes))} exec {shlex.quote(sys.executable)} "$@"\n'
    )
    python.chmod(0o755)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": str(python), "FAKE_NVML_INIT_S": nvml_init_s}
    env.pop("CUDA_DEVICE_ORDER", None)
    done = subprocess.run(
        ["bash", str(SCRIPT), "--gpu", "2", "--limit", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # 1: the OOM reproduced
    log = (out / "lm_eval.log").read_text()
    assert "CUDA_VISIBLE_DEVICES=GPU-fake-2" in log  # NVML's GPU 2, by UUID: no index ambiguity
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in log
    report = json.loads((out / "report.json").read_text())
    assert report["out_of_memory"] == [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.12 GiB."
    ]
    assert set(report["versions"]) == {
        "vllm",
        "torch",
        "flashinfer-python",
        "lm-eval",
        "nvidia-ml-py",
    }
    assert report["nvml_total_bytes"] == 80 << 30  # sampled GPU 2 (the fake reports (2+1) GiB used)
    assert report["nvml_peak_used_bytes"] == 3 << 30
