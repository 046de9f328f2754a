"""The commands end to end on fixture trees: each side in a child process, whose death is an
error, never a silent exit 0 (integration tier: every test starts Python processes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from suites.adapter.conftest import ERA034, copy_tree

pytestmark = pytest.mark.integration


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, check=False
    )


def _edit_build(tree_root: Path, new_first_line: str) -> None:
    toy = tree_root / "vllm/v1/attention/backends/toy.py"
    text = toy.read_text()
    toy.write_text(
        text.replace(
            "        m = common_attn_metadata\n",
            new_first_line + "        m = common_attn_metadata\n",
            1,
        )
    )


def test_diff_of_a_tree_with_itself_exits_0() -> None:
    done = _harness("diff", "--base", str(ERA034), "--head", str(ERA034), "--steps", "30")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FLASH_ATTN: same over 30 steps" in done.stdout
    assert "FLASHMLA: not compared: both trees:" in done.stdout


def test_scaling_names_an_injected_allocation_and_exits_1(tmp_path: Path) -> None:
    tree = copy_tree(ERA034, tmp_path)
    _edit_build(
        tree.root, "        extra = torch.ones(self.vllm_config.cache_config.num_gpu_blocks)\n"
    )
    done = _harness(
        "memory",
        "scaling",
        "--vllm-src",
        str(tree.root),
        "--backend",
        "FLASH_ATTN",
        "--max-steps",
        "8",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "vllm/v1/attention/backends/toy.py:" in done.stdout
    assert "aten.ones.default grows 4 bytes/block, on every step (8)" in done.stdout
    assert "not covered: the impl's forward" in done.stdout


@pytest.mark.parametrize("death", ["os._exit(0)", "sys.exit(0)", "os.kill(os.getpid(), 9)"])
def test_the_trees_code_ending_the_process_is_never_a_silent_exit_0(
    tmp_path: Path, death: str
) -> None:
    tree = copy_tree(ERA034, tmp_path)
    _edit_build(tree.root, f"        import os, sys; {death}\n")
    done = _harness(
        "memory",
        "scaling",
        "--vllm-src",
        str(tree.root),
        "--backend",
        "FLASH_ATTN",
        "--max-steps",
        "4",
    )
    assert done.returncode == 1, done.stdout
    if death == "sys.exit(0)":  # caught in the step: an exception of the tree's code
        assert "SystemExit" in done.stdout and "toy.py" in done.stdout
    else:
        assert "before returning" in done.stdout
        assert "while FLASH_ATTN step 0 (the tree's reorder and build) ran" in done.stdout


def test_a_thread_of_one_backend_ending_the_process_fails_the_command_beside_others(
    tmp_path: Path,
) -> None:
    """``os._exit(0)`` from a thread of TRITON_ATTN's build while FLASH_ATTN runs clean: exit 1
    naming the step (it was 'not run' and exit 0)."""
    tree = copy_tree(ERA034, tmp_path)
    toy = tree.root / "vllm/v1/attention/backends/toy_triton.py"
    toy.write_text(
        toy.read_text().replace(
            "        m = common_attn_metadata\n",
            "        import os, threading\n"
            "        threading.Thread(target=os._exit, args=(0,)).start()\n"
            "        m = common_attn_metadata\n",
            1,
        )
    )
    done = _harness("memory", "scaling", "--vllm-src", str(tree.root), "--max-steps", "4")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FLASH_ATTN: 4 steps" in done.stdout and "OK: nothing but" in done.stdout
    assert "TRITON_ATTN: ERROR: TRITON_ATTN at 1x num_blocks: the process exited" in done.stdout


def test_a_build_that_never_returns_is_killed_and_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.adapter import jobs
    from harness.cli import main

    tree = copy_tree(ERA034, tmp_path)
    _edit_build(tree.root, "        import time; time.sleep(3600)\n")
    monkeypatch.setattr(jobs, "CHILD_TIMEOUT", 20.0)
    argv = ["diff", "--base", str(tree.root), "--head", str(tree.root), "--backend", "FLASH_ATTN"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "FLASH_ATTN: ERROR: base: FLASH_ATTN on the base tree: the process ran past 20 s" in out


def test_list_backends_says_what_runs_and_what_stops_the_others() -> None:
    done = _harness("memory", "scaling", "--vllm-src", str(ERA034), "--list-backends")
    assert done.returncode == 0, done.stderr
    assert "FLASH_ATTN" in done.stdout and "runs: SPEC era" in done.stdout
    assert (
        "FLASHMLA                     stops: importing vllm.v1.attention.backends.broken: "
        "ModuleNotFoundError: No module named 'vllm.v1.attention.ops'" in done.stdout
    )
