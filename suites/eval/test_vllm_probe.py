"""The real-engine checks: the scaling verdict and the repro script, on the CPU (no GPU needed);
the GPU runs themselves are in test_gpu_repro.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.eval.vllm_probe import NOISE_BYTES, StepMemory, prompts, verdict

GiB = 1024**3
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "repro_flashinfer_oom.sh"


def _run(blocks: int, baseline: int, step: int) -> StepMemory:
    return StepMemory(blocks, baseline, baseline + step, num_prompts=64, num_generated_tokens=1)


def test_steps_that_do_not_grow_with_the_kv_cache_pass() -> None:
    result = verdict(_run(1024, 20 * GiB, GiB), _run(2048, 24 * GiB, GiB + NOISE_BYTES // 2))
    assert result["kv_cache_growth_bytes"] == 4 * GiB
    assert not result["scales_with_num_blocks"]


def test_one_layers_worth_of_kv_cache_per_step_is_caught() -> None:
    # The FlashInfer regression copied one layer's KV cache: 1/32 of Llama-3.1-8B's KV growth.
    layer = 4 * GiB // 32
    result = verdict(_run(1024, 20 * GiB, GiB), _run(2048, 24 * GiB, GiB + layer))
    assert result["scales_with_num_blocks"] and result["step_peak_growth_bytes"] == layer


def test_prompts_are_lm_eval_gsm8k_five_shot() -> None:
    (prompt,) = prompts(1)
    assert prompt.count("Question: ") == 6 and prompt.endswith("\nAnswer:")
    assert prompt.count("#### ") == 5


def test_the_repro_script_refuses_cleanly_without_vllm(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(SCRIPT), "--out", str(tmp_path / "out"), "--limit", "1"],
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "needs CUDA, vllm, lm_eval and nvidia-ml-py" in done.stderr


def test_the_repro_script_is_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    done = subprocess.run([shellcheck, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout
