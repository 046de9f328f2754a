"""``harness memory``: exit codes, JSON, plot, clean usage errors (mirrors harness/simulation/cli.py;
named test_memory_cli.py because suites/overrides/test_cli.py takes the module name test_cli)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["memory", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_simulate_tiny_completes_with_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", "--model", "tiny", "--workload", "tiny")
    assert code == 0
    assert "sizing (vLLM 0.9.0 order)" in out and "num_blocks" in out
    assert "completed: 35 steps, 12/12 requests finished" in out


def test_simulate_json_and_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png = tmp_path / "run.png"
    code, out, _ = run(
        capsys,
        "simulate",
        "--model=tiny",
        "--workload=tiny",
        "--device=b200",
        "--max-steps=3",
        "--json",
        f"--plot={png}",
    )
    assert code == 0
    data = json.loads(out)  # exactly one JSON object on stdout
    assert data["device"] == "b200" and data["steps"] == 3 and data["oom"] is None
    assert png.read_bytes().startswith(b"\x89PNG")


def test_simulate_regression_exits_1_naming_the_allocation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(
        capsys, "simulate", "--device", "h100-95", "--regression", "flashinfer-oom", "--max-steps=1"
    )
    assert code == 1
    assert "OUT OF MEMORY at step 0" in out
    assert "Tried to allocate 2.1" in out
    assert "harness/regressions/flashinfer_oom.py:" in out


def test_scaling_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "scaling", "--model", "tiny", "--max-steps", "6")
    assert code == 0 and "OK" in out
    code, out, _ = run(
        capsys, "scaling", "--model", "tiny", "--regression", "flashinfer-oom", "--max-steps=6"
    )
    assert code == 1
    assert "FAIL" in out and "harness/regressions/flashinfer_oom.py:" in out


def test_scaling_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "scaling", "--json", "--max-steps", "3")
    assert code == 0
    data = json.loads(out)
    assert data["ok"] is True and data["num_blocks"] == [64, 128]


def test_devices_listing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "devices")
    assert code == 0 and "h100-95" in out and "95.00 GiB" in out and "178.35 GiB" in out


def test_regressions_listing_is_a_top_level_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["regressions"]) == 0
    assert "\nflashinfer-oom " in capsys.readouterr().out
    assert main(["regressions", "show", "flashinfer-oom"]) == 0
    out = capsys.readouterr().out
    assert "2.12 GiB" in out and "4.50 GiB" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "--device", "h100-999"], "unknown device profile 'h100-999'"),
        (["simulate", "--model", "llama-9"], "unknown model 'llama-9'"),
        (["simulate", "--workload", "mmlu"], "unknown workload 'mmlu'"),
        (
            ["simulate", "--regression", "nope"],
            "unknown regression 'nope'; available: aiter-build-decode-rename,",
        ),
        (["simulate", "--non-torch", "lots"], "invalid size 'lots'"),
        (["simulate", "--plot", "out.svg"], "does not end in .png"),
        (["simulate", "--max-steps", "0"], "--max-steps must be positive"),
        (["simulate", "--gpu-memory-utilization", "2"], "gpu_memory_utilization"),
        (["scaling", "--num-blocks", "4", "4"], "num_blocks"),
        (["scaling", "--regression", "nope"], "unknown regression 'nope'"),
        (["simulate", "--model", "tiny"], "workload 'gsm8k' does not fit model 'tiny'"),
        (["scaling", "--workload", "gsm8k"], "workload 'gsm8k' does not fit"),
        (["simulate", "--non-torch", "200 GiB"], "non-torch memory must be at least 0 and less"),
        (["simulate", "--non-torch", "95 GiB"], "non-torch memory must be at least 0 and less"),
        (["simulate", "--non-torch", "-1 GiB"], "invalid size '-1 GiB'"),
        (["simulate", "--top", "-3"], "--top must be positive"),
        (["simulate", "--gpu-memory-utilization", "-0.5"], "gpu_memory_utilization"),
        (["scaling", "--num-blocks", "64", "1000000000"], "num_blocks must be at most"),
        (["scaling", "--num-blocks", "-64", "128"], "num_blocks must be two different positive"),
        (
            ["scaling", "--device", "cpu", "--num-blocks", "64", "2000000"],
            "num_blocks must be at most",
        ),
        (["scaling", "--max-steps", "-1"], "--max-steps must be positive"),
    ],
)
def test_usage_errors_exit_2_without_traceback(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert err.startswith("harness: error: ") and "Traceback" not in err
    assert out == ""


@pytest.mark.parametrize(
    "kind", ["missing directory", "parent is a file", "a directory", "read-only directory"]
)
def test_unwritable_plot_path_is_refused_before_any_simulation_work(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    import harness.simulation.simulate

    def must_not_run(**kwargs: object) -> None:
        raise AssertionError("simulate ran before the plot path was checked")

    monkeypatch.setattr(harness.simulation.simulate, "simulate", must_not_run)
    target = tmp_path / "run.png"
    if kind == "missing directory":
        target = tmp_path / "missing" / "run.png"
    elif kind == "a directory":
        target.mkdir()
    elif kind == "parent is a file":
        (tmp_path / "file").write_text("")
        target = tmp_path / "file" / "run.png"
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only directories")
        tmp_path.chmod(0o500)
    code, out, err = run(capsys, "simulate", "--model=tiny", "--workload=tiny", f"--plot={target}")
    assert code == 2 and out == ""
    assert err.startswith("harness: error: cannot write ") and err.count("\n") == 1
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv", [["simulate", "--max-steps", "many"], ["scaling", "--num-blocks", "1e9", "64"]]
)
def test_argparse_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["memory", *argv])
    assert exc.value.code == 2
    assert "invalid int value" in capsys.readouterr().err


def test_memory_without_subcommand_prints_help_and_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys)
    assert code == 2 and "simulate" in out and "scaling" in out


ENDING = Path(__file__).with_name("ending_backends.py")


def test_user_code_that_ends_the_run_is_an_error_exit_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``sys.exit(0)`` in a user's builder: exit 1 naming it, never exit 0 with no output
    (issue 27, bug 1). The whole matrix of endings and commands is the integration test below."""
    spec = f"{ENDING}:ExitBackend"
    line = ENDING.read_text().splitlines().index("    sys.exit(0)") + 1
    code, out, err = run(capsys, "scaling", "--max-steps", "1", "--regression", spec)
    assert code == 1 and out == ""
    assert err.splitlines()[-2:] == [
        f"harness: error: --regression {spec!r}: SystemExit: sys.exit(0) called ({ENDING}:{line});"
        " its last lines:",
        "  | ExitBackend's builder ends the run now",
    ]


@pytest.mark.parametrize("command", ["simulate", "scaling"])
def test_user_code_runs_in_a_child_and_its_end_is_exit_1(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only ``MODULE:ATTR`` goes to a child; a catalog name runs here (the fast path)."""
    import harness.child
    import harness.errors

    calls: list[str] = []

    def ended(function: str, *args: object) -> object:
        calls.append(function)
        raise harness.errors.ChildError("the process exited with status 0", "step 2", ["last"])

    monkeypatch.setattr(harness.child, "run_in_child", ended)
    argv = [command, "--model", "tiny", "--workload", "tiny", "--max-steps", "1"]
    code, out, err = run(capsys, *argv, "--regression", "my_module:Backend")
    assert calls == [f"harness.simulation.cli:{command}_report"]
    assert code == 1 and out == ""
    assert err == (
        "harness: error: --regression 'my_module:Backend': the process exited with status 0, "
        "while step 2 ran; its last lines:\n  | last\n"
    )
    code, out, _ = run(capsys, *argv, "--regression", "flashinfer-oom")
    assert calls == [f"harness.simulation.cli:{command}_report"] and code == 1 and out


@pytest.mark.integration
@pytest.mark.parametrize("command", ["simulate", "scaling"])
@pytest.mark.parametrize(
    ("backend", "how"),
    [
        ("ExitBackend", "SystemExit: sys.exit(0) called ("),
        ("OsExitBackend", "the process exited with status 0 before returning (os._exit()"),
        ("ThreadExitBackend", "ended: SystemExit: sys.exit(0) called ("),
        ("ThreadOsExitBackend", "the process exited with status 0 before returning (os._exit()"),
        ("RaisingBackend", "ValueError: the builder broke ("),
    ],
)
def test_every_way_user_code_ends_is_exit_1_with_one_error(
    command: str, backend: str, how: str, tmp_path: Path
) -> None:
    """Issue 27, bugs 1 and 10, end to end through the installed command."""
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("harness")
    argv = [str(exe), "memory", command, "--model", "tiny", "--workload", "tiny"]
    argv += ["--max-steps", "2", "--regression", f"{ENDING}:{backend}"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("harness: error:")]
    assert how in error and "Traceback" not in done.stderr
    assert done.stderr.rstrip().endswith(f"  | {backend}'s builder ends the run now")
