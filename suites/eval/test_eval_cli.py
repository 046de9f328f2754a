"""``harness eval gsm8k``: exit codes (0 clean, 1 OOM or over budget, 2 usage), the JSON object,
the text report, and the missing-extra message (mirrors harness/eval/cli.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main

pytestmark = pytest.mark.usefixtures("no_env_info")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["eval", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_8b_on_a_simulated_h100_with_the_regression_fails_naming_the_allocation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(
        capsys,
        "gsm8k",
        "--model=llama-3.1-8b",
        "--device=meta:h100-95",
        "--regression=flashinfer-oom",
        "--limit=3",
        "--json",
    )
    assert code == 1, err
    data: dict[str, Any] = json.loads(out)  # exactly one JSON object on stdout
    assert data["results"] is None  # lm-eval never finished, as with the real vLLM
    oom = data["memory"]["oom"]
    assert {"requested_bytes", "free_bytes", "message", "op", "source"} <= set(oom)
    assert oom["message"].startswith("CUDA out of memory. Tried to allocate 2.12 GiB.")
    assert oom["op"] == "aten.clone.default"
    assert oom["source"].startswith("harness/regressions/flashinfer_oom.py:")
    assert data["engine"]["num_requests"] == 3 and data["engine"]["num_preemptions"] == 0
    assert "Processed prompts" not in err and "%|" not in err  # quiet under --json


def test_text_report_and_a_breached_budget_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "gsm8k", "--limit=2", "--max-gen-toks=8", "--memory-budget=2 MiB")
    assert code == 1
    assert "exact_match" in out and "strict-match" in out and "flexible-extract" in out
    assert "engine: 8 steps, 2 requests in 1 generate call(s), 0 preemptions" in out
    assert "tokens/s" in out and "cpu: peak " in out
    assert "aten.zeros.default at harness/reference/runner.py:" in out  # the KV cache's site
    assert "memory budget 2.00 MiB: EXCEEDED" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--device=gpu"], "harness-ref runs on cpu or meta:PROFILE"),
        (["--device=meta:h900"], "unknown device profile 'h900'"),
        (["--batch-size=0"], "--batch-size must be positive"),
        (["--batch-size=many"], "--batch-size must be 'auto' or a positive integer"),
        (["--limit=0"], "--limit must be positive"),
        (["--max-gen-toks=0"], "--max-gen-toks must be positive"),
        (["--regression=nope"], "unknown regression 'nope'"),
        (
            ["--regression=no.such.module:X"],
            "--regression 'no.such.module:X': cannot import no.such.module: no module named 'no'",
        ),
        (["--memory-budget=lots"], "invalid size 'lots'"),
        (["--model=llama-3.1-8b", "--device=cpu"], "does not run on the CPU"),
        (["--data=/nonexistent"], "not a directory"),
        (["--limit=99999999999999999999"], "--limit must be at most 9223372036854775807"),
        (["--num-fewshot=99999999999999999999"], "the train split has 7473 examples"),
        (["--max-gen-toks=99999999999999999999"], "leaves no room for a prompt"),
        (["--seed=99999999999999999999"], "--seed must be an integer from 0 to"),
        (["--seed=-1"], "--seed must be an integer from 0 to"),
    ],
)
def test_usage_errors_exit_2_without_a_traceback(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "gsm8k", "--limit=1", *argv)
    assert code == 2
    assert message in err and "Traceback" not in err and out == ""


def test_a_data_file_that_is_not_utf8_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for split in ("train", "test"):
        (tmp_path / f"{split}.jsonl").write_bytes(b'{"question": "\xff"}\n')
    code, out, err = run(capsys, "gsm8k", "--limit=1", f"--data={tmp_path}")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "train.jsonl:1: not UTF-8 text" in err, err


def test_without_lm_eval_it_says_how_to_install_the_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "lm_eval" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    code, _, err = run(capsys, "gsm8k")
    assert code == 2 and "pip install 'attn-metadata-harness[eval]'" in err


def test_eval_without_a_task_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys)
    assert code == 2 and "gsm8k" in out


def test_user_code_runs_in_a_child_and_its_end_is_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--regression MODULE:ATTR`` runs the eval in a child; however it ends is exit 1 with one
    error (issue 27, bug 1; end to end in the integration test below)."""
    import harness.child
    import harness.errors

    calls: list[str] = []

    def ended(function: str, *args: object) -> object:
        calls.append(function)
        raise harness.errors.ChildError("SystemExit: sys.exit(0) called (b.py:3)", None, [])

    monkeypatch.setattr(harness.child, "run_in_child", ended)
    code, out, err = run(capsys, "gsm8k", "--limit=1", "--regression", "b.py:Backend")
    assert calls == ["harness.eval.cli:gsm8k_report"] and code == 1 and out == ""
    assert err == (
        "harness: error: --regression 'b.py:Backend': SystemExit: sys.exit(0) called (b.py:3)\n"
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    ("backend", "how"),
    [
        ("ExitBackend", "SystemExit: sys.exit(0) called ("),
        ("OsExitBackend", "the process exited with status 0 before returning (os._exit()"),
        ("RaisingBackend", "ValueError: the builder broke ("),
    ],
)
def test_a_user_backend_that_ends_the_eval_is_exit_1(
    backend: str, how: str, tmp_path: Path
) -> None:
    import subprocess
    import sys

    ending = Path(__file__).parents[1] / "simulation" / "ending_backends.py"
    exe = Path(sys.executable).with_name("harness")
    argv = [str(exe), "eval", "gsm8k", "--limit=1", "--max-gen-toks=4"]
    done = subprocess.run(
        [*argv, "--regression", f"{ending}:{backend}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1 and done.stdout == "", done.stderr
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("harness: error:")]
    assert how in error and "Traceback" not in done.stderr
