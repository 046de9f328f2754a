"""The real thing on a GPU (``make test-gpu``): upstream lm-eval gsm8k on vLLM with FlashInfer, and
per-step memory against two ``num_gpu_blocks_override`` values.

Both need an interpreter with CUDA, vLLM, lm-eval and nvidia-ml-py: ``VLLM_PYTHON`` (default: the
one running pytest, whose CPU torch has no CUDA, so they skip). ``HARNESS_VLLM_MODEL`` picks the
model (default Llama-3.1-8B-Instruct, which must be downloadable or cached) and
``HARNESS_REPRO_LIMIT`` the number of gsm8k problems (default: all 1,319, as the original report).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.eval.vllm_probe import DEFAULT_MODEL

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "repro_flashinfer_oom.sh"
MODEL = os.environ.get("HARNESS_VLLM_MODEL", DEFAULT_MODEL)
CHECK = (
    "import importlib.util, sys, torch\n"
    "missing = [m for m in ('vllm', 'lm_eval', 'pynvml') if importlib.util.find_spec(m) is None]\n"
    "sys.exit(f'missing {missing}' if missing else 0 if torch.cuda.is_available() else 'no CUDA')\n"
)


def vllm_python() -> str:
    """An interpreter with CUDA and vLLM, or a skip that says what is missing."""
    python = os.environ.get("VLLM_PYTHON", sys.executable)
    probe = subprocess.run([python, "-c", CHECK], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or ["no usable interpreter"])[-1]
        pytest.skip(f"needs CUDA and vLLM ({why}); set VLLM_PYTHON to such an interpreter")
    return python


def test_upstream_gsm8k_on_vllm_with_flashinfer_finishes(
    tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    python = vllm_python()
    command = ["bash", str(SCRIPT), "--model", MODEL, "--out", str(tmp_path)]
    if "HARNESS_REPRO_LIMIT" in os.environ:
        command += ["--limit", os.environ["HARNESS_REPRO_LIMIT"]]
    done = subprocess.run(
        command, env={**os.environ, "PYTHON": python}, capture_output=True, text=True, check=False
    )
    report = json.loads((tmp_path / "report.json").read_text())
    # The verdict, in the JUnit report of make test-gpu (ci.pytest_gpu_gate copies it to JSON too).
    record_property("repro_out_of_memory", report["out_of_memory"] or "none")
    record_property("repro_accuracy", report["accuracy"])
    assert done.returncode == 0, report["out_of_memory"] or done.stdout + done.stderr
    assert report["accuracy"] and report["nvml_peak_used_bytes"] > 0
    assert report["kv_cache_log"], "vLLM logged no KV cache size"


def test_per_step_memory_does_not_grow_with_num_gpu_blocks() -> None:
    python = vllm_python()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "VLLM_USE_V1": "1",
        "VLLM_ATTENTION_BACKEND": "FLASHINFER",
    }
    done = subprocess.run(
        [python, "-m", "harness.eval.vllm_probe", "compare", "--model", MODEL],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-4000:]
    result = json.loads(done.stdout)
    assert not result["scales_with_num_blocks"], json.dumps(result, indent=2)
