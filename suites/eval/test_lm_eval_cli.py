"""``harness lm-eval``: the seed's command with and without the regression, lm-eval's flags passed
through, and one-line usage errors before any work (mirrors harness/eval/lm_eval_cli.py)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("lm_eval")

from harness.cli import main

pytestmark = pytest.mark.usefixtures("no_env_info")

SEED = [
    "--model",
    "harness-ref",
    "--model_args",
    "pretrained=meta-llama/Llama-3.1-8B-Instruct,device=meta:h100-95,regression=flashinfer-oom",
    "--trust_remote_code",
    "--tasks",
    "gsm8k",
    "--num_fewshot",
    "5",
    "--batch_size",
    "auto",
]
"""The seed's command with only the model swapped (the regression in its model_args)."""
WITHOUT_REGRESSION = [arg.removesuffix(",regression=flashinfer-oom") for arg in SEED]


@pytest.fixture(autouse=True)
def fresh_lm_eval_logging() -> Iterator[None]:
    """lm-eval's ``setup_logging`` binds one handler to the ``sys.stderr`` of its first call (here
    a test's capture, closed afterwards): each test gets its own, as each command line does."""
    import lm_eval.utils

    yield
    logger = logging.getLogger("lm_eval")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    monkey: Any = lm_eval.utils
    monkey._LOGGING_CONFIGURED = False


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["lm-eval", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_engine_out_of_memory_is_one_line_naming_the_allocation() -> None:
    """What the seed's command prints when it dies (end to end in the integration test below)."""
    from harness.eval.lm_eval_cli import describe_oom
    from harness.eval.simulated import EngineOutOfMemoryError
    from harness.regressions import get_regression
    from harness.simulation.simulate import simulate
    from harness.simulation.workload import gsm8k

    backend = get_regression("flashinfer-oom").backend
    result = simulate(
        model="llama-3.1-8b", device="h100-95", workload=gsm8k(), backend=backend, max_steps=1
    )
    line = describe_oom(EngineOutOfMemoryError(result))
    assert line.startswith("out of memory at engine step 0: CUDA out of memory. Tried to allocate")
    assert "2.12 GiB." in line and "\n" not in line
    assert "(aten.clone.default at harness/regressions/flashinfer_oom.py:" in line
    assert line.endswith(", simulated on h100-95)")


def test_lm_evals_value_errors_and_an_offline_dataset_become_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hooks around lm-eval's own task handling (end to end in the integration tests)."""
    from lm_eval.config.evaluate_config import EvaluatorConfig

    from harness.errors import HarnessError
    from harness.eval.lm_eval_cli import OFFLINE_HINT, command_line_hooks

    config: Any = EvaluatorConfig

    class Manager:
        def load(self, *args: object) -> None:
            raise ConnectionError("Couldn't reach 'x/y' on the Hub")

    def unknown_task(self: Any, metadata: object = None) -> object:
        raise ValueError("Tasks not found: gsm9k")

    monkeypatch.setattr(config, "process_tasks", unknown_task)
    with command_line_hooks(), pytest.raises(HarnessError, match=r"^Tasks not found: gsm9k$"):
        config.process_tasks(SimpleNamespace(metadata={}))
    assert config.process_tasks is unknown_task  # restored

    monkeypatch.setattr(config, "process_tasks", lambda self, metadata=None: Manager())
    monkeypatch.setattr("harness.eval.task.use_local_splits", lambda *args: None)
    with command_line_hooks():
        manager = config.process_tasks(SimpleNamespace(metadata={}))
        with pytest.raises(HarnessError) as caught:
            manager.load()
    assert str(caught.value) == f"Couldn't reach 'x/y' on the Hub ({OFFLINE_HINT})"


@pytest.mark.integration
def test_the_seeds_command_with_the_regression_ends_with_one_line_naming_the_allocation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, *SEED, "--limit", "3")
    assert code == 1
    assert "Traceback" not in err and "|Tasks|" not in out
    (line,) = [line for line in err.splitlines() if line.startswith("harness lm-eval:")]
    assert line.startswith("harness lm-eval: out of memory at engine step ")
    assert "CUDA out of memory. Tried to allocate 2.12 GiB." in line
    assert "(aten.clone.default at harness/regressions/flashinfer_oom.py:" in line


@pytest.mark.integration
def test_the_seeds_command_without_the_regression_prints_lm_evals_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, *WITHOUT_REGRESSION, "--limit", "3")
    assert code == 0, err
    assert "harness-ref ({'pretrained': 'meta-llama/Llama-3.1-8B-Instruct'})" in out
    assert "limit: 3.0, num_fewshot: 5, batch_size: auto" in out
    assert "|Tasks|Version|" in out and "|gsm8k|" in out
    assert "flexible-extract" in out and "strict-match" in out
    assert "meta tensors hold no values" in err


@pytest.mark.integration
def test_lm_evals_flags_pass_through(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(
        capsys,
        "run",
        "-M",
        "harness-ref",
        "-a",
        "pretrained=tiny",
        "max_gen_toks=4",
        "--tasks",
        "gsm8k_cot",  # another of lm-eval's gsm8k tasks: offline too
        "-L",
        "2",
        "-f",
        "1",
        "-b",
        "2",
        "--seed",
        "7",
        "--output_path",
        str(tmp_path),
        "--log_samples",
    )
    assert code == 0, err
    assert "|gsm8k_cot|" in out
    (results_file,) = tmp_path.glob("*/results_*.json")
    results = json.loads(results_file.read_text())
    assert results["n-shot"] == {"gsm8k_cot": 1}
    assert results["config"]["batch_size"] == "2" and results["config"]["random_seed"] == 7
    (samples_file,) = tmp_path.glob("*/samples_gsm8k_cot_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert sorted({s["doc_id"] for s in samples}) == [0, 1]  # one line per document and filter


@pytest.mark.integration
def test_a_task_lm_eval_does_not_know_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--model", "harness-ref", "--tasks", "gsm9k", "--limit", "1")
    assert code == 2 and out == ""
    assert err.strip().splitlines()[-1] == "harness: error: Tasks not found: gsm9k"
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--model_args", "pretrained=gpt2"],
            "pretrained='gpt2': harness-ref does not know this model's shape; known: llama-3.1-8b,",
        ),
        (["--model_args", "device=cuda"], "device='cuda': harness-ref runs on cpu or meta:PROFILE"),
        (["--device", "cuda:0"], "device='cuda:0': harness-ref runs on cpu or meta:PROFILE"),
        (["--model_args", "device=meta:h900"], "unknown device profile 'h900'"),
        (["--device", "cpu", "--model_args", "device=cpu"], "device is given twice"),
        (
            ["--model_args", "dtype=auto"],
            "harness-ref takes no 'dtype'; it takes attention_backend,",
        ),
        (["--model_args", "regression=nope"], "unknown regression 'nope'"),
        (["--model_args", "attention_backend=XFORMERS"], "attention_backend='XFORMERS': not a"),
        (["--model_args", "seed=x"], "seed= must be an integer from 0 to"),
        (["--model_args", "pretrained="], "pretrained='': harness-ref does not know"),
        (["--model_args", "max_gen_toks=0"], "max_gen_toks= must be a positive integer, got 0"),
        (["--model_args", "max_num_seqs=many"], "max_num_seqs= must be a positive integer"),
        (["--model_args", "gpu_memory_utilization=2"], "gpu_memory_utilization= must be in"),
        (["--limit", "99999999999999999999"], "--limit must be a fraction in (0, 1) or a count"),
        (["--limit", "nan"], "--limit must be"),
        (["--limit", "0"], "--limit must be"),
        (["--limit", "-1"], "--limit must be"),
        (["--num_fewshot", "99999999999999999999"], "gsm8k's train split has 7473 examples"),
        (["--model_args", "seed=99999999999999999999"], "seed= must be an integer from 0 to"),
        (["--batch_size", "many"], "--batch_size must be auto, auto:N or a positive integer"),
    ],
)
def test_usage_errors_exit_2_with_one_line_before_any_work(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "--model", "harness-ref", "--tasks", "gsm8k", *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("", "harness: error: --output_path is empty (name the directory to write into)"),
        ("file/out", "harness: error: --output_path {tmp}/file/out: {tmp}/file is not a directory"),
        ("file", "harness: error: --output_path {tmp}/file: {tmp}/file is not a directory"),
        (
            "file/out.json",
            "harness: error: --output_path's directory {tmp}/file: {tmp}/file is not a directory",
        ),
        ("dir.json", "harness: error: --output_path {tmp}/dir.json: it is a directory"),
        ("dangling/out", "harness: error: --output_path {tmp}/dangling/out: {tmp}/dangling is a "),
    ],
)
def test_an_output_path_lm_eval_cannot_write_is_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str, message: str
) -> None:
    """lm-eval logs a failed save at INFO and exits 0 having written nothing (issue 27, bug 6)."""
    (tmp_path / "file").write_text("")
    (tmp_path / "dir.json").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    output_path = str(tmp_path / where) if where else ""
    argv = ["--model", "harness-ref", "--tasks", "gsm8k", "--limit", "1"]
    code, out, err = run(capsys, *argv, "--output_path", output_path)
    assert code == 2 and out == ""
    assert err.startswith(message.format(tmp=tmp_path)) and err.count("\n") == 1, err


def test_an_output_path_that_can_be_made_passes_and_nothing_is_made(tmp_path: Path) -> None:
    from harness.eval.lm_eval_cli import check_output_path

    for where in ("new/deeper", "new/out.json", "out.json", "."):
        check_output_path(str(tmp_path / where))
    assert list(tmp_path.iterdir()) == []


def test_vllm_attention_backend_is_read_and_the_argument_wins(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_ATTENTION_BACKEND", "FLASH_ATTN")
    argv = ["--model", "harness-ref", "--tasks", "gsm8k", "--model_args"]
    code, _, err = run(capsys, *argv, "regression=flashinfer-oom")
    assert code == 2
    assert "runs FLASHINFER_VLLM_V1, not the FLASH_ATTN_VLLM_V1 that VLLM_ATTENTION_BACKEND" in err
    monkeypatch.setenv("VLLM_ATTENTION_BACKEND", "NOPE")
    code, _, err = run(capsys, *argv, "pretrained=tiny")
    assert code == 2 and "VLLM_ATTENTION_BACKEND='NOPE': not a backend" in err
    # The argument wins: the environment variable is not even read.
    from harness.eval.lm_eval_cli import check_model_args

    forced = {"attention_backend": "FLASHINFER", "regression": "flashinfer-oom"}
    assert check_model_args(forced, None).label == "flashinfer-oom"


def test_a_data_file_that_is_not_utf8_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for split in ("train", "test"):
        (tmp_path / f"{split}.jsonl").write_bytes(b'{"question": "\xff"}\n')
    code, _, err = run(
        capsys, "--model", "harness-ref", "--tasks", "gsm8k", "--model_args", f"data={tmp_path}"
    )
    assert code == 2 and err.count("\n") == 1 and "train.jsonl:1: not UTF-8 text" in err, err


def test_help_is_lm_evals_own(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["lm-eval", "run", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--num_fewshot" in out and "--batch_size" in out and "--model_args" in out


def test_nothing_is_registered_until_the_command_runs() -> None:
    script = (
        "import harness.cli, lm_eval.models\n"
        "from lm_eval.api.registry import model_registry\n"
        "harness.cli.build_parser()\n"
        "print('harness-ref' in model_registry)\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert shown.stdout.strip() == "False"


def test_an_lm_eval_without_its_cli_package_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.eval.lm import MODEL_NAME
    from harness.eval.lm_eval_cli import MODEL

    assert MODEL == MODEL_NAME
    monkeypatch.setitem(sys.modules, "lm_eval._cli", None)  # as in lm-eval releases before it
    code, _, err = run(capsys, "--model", "harness-ref", "--tasks", "gsm8k")
    assert code == 2 and "needs lm-eval's lm_eval._cli command line" in err


@pytest.mark.integration
def test_a_task_whose_dataset_is_not_there_offline_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "offline.yaml").write_text(
        "task: harness_offline_probe\n"
        "dataset_path: harness-tests/no-such-dataset\n"
        "output_type: generate_until\n"
        "test_split: test\n"
        "doc_to_text: '{{question}}'\n"
        "doc_to_target: '{{answer}}'\n"
    )
    code, out, err = run(
        capsys,
        *["--model", "harness-ref", "--include_path", str(tmp_path)],
        *["--tasks", "harness_offline_probe", "--limit", "1"],
    )
    assert code == 2 and out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("harness: error: Couldn't reach 'harness-tests/no-such-dataset'")
    assert "gsm8k's tasks read local splits" in last and "Traceback" not in err
