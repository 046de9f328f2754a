"""``make test-gpu``'s gate, with CUDA absent and with CUDA faked present (pytester, in process)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ci import pytest_gpu_gate as gate

ROOT = Path(__file__).resolve().parents[2]

TESTS = """
import pytest

@pytest.mark.gpu
def test_runs(record_property):
    record_property("memory_peak_bytes", 96 << 20)

@pytest.mark.gpu
def test_skips_for_no_reason_a_gpu_agent_accepts():
    pytest.skip("needs a CUDA GPU")

@pytest.mark.gpu
@pytest.mark.skipif(True, reason="needs CUDA and flashinfer-python (make test-gpu)")
def test_skips_for_a_missing_optional_package():
    pass

@pytest.mark.gpu
def test_skips_naming_an_installed_package():
    pytest.skip("needs json")  # json is installed: the skip is for something else

@pytest.mark.gpu
@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False

def test_not_gpu():
    pass
"""
ARGS = ("-p", "ci.pytest_gpu_gate", "-p", "no:cacheprovider", "-q", "-m", "gpu")
ARGS += ("-p", "no:harness_memory", "-p", "no:harness_simulation", "-p", "no:harness_golden")
ARGS += ("-p", "no:hypothesispytest")  # no plugin the gate does not need: each run is faster
ARGS += ("-W", "ignore::pytest.PytestAssertRewriteWarning")  # this module imported the plugin


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Any:
    pytester.makepyfile(test_gpu=TESTS)
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs CUDA\n")
    monkeypatch.setitem(gate.OPTIONAL_PACKAGES, "json", ("json",))

    def run(unavailable: str | None) -> tuple[pytest.RunResult, dict[str, Any]]:
        monkeypatch.setattr(gate, "cuda_unavailable_reason", lambda: unavailable)
        monkeypatch.setattr(gate, "cuda_device_summary", lambda: {"name": "Fake H100"})
        report = pytester.path / "reports" / "memory-gpu.json"
        result = pytester.runpytest(*ARGS, f"--gpu-report={report}")
        return result, json.loads(report.read_text())

    return run


def test_without_cuda_every_gpu_test_skips_and_the_run_says_so_first_and_last(run: Any) -> None:
    result, report = run("torch is built without CUDA")
    assert result.ret == 0
    result.assert_outcomes(skipped=5, deselected=1)
    line = "no CUDA device: 0 GPU tests ran, 5 skipped (torch is built without CUDA)"
    lines = [x for x in result.outlines if x.strip()]
    assert lines[0] == line
    assert lines[-1] == line
    assert report["summary"] == {"selected": 5, "ran": 0, "skipped": 5, "failed_or_errored": 0}
    assert report["cuda"] == {"unavailable_reason": "torch is built without CUDA", "device": None}


def test_with_cuda_a_skip_fails_unless_it_names_a_missing_optional_package(
    run: Any, pytester: pytest.Pytester
) -> None:
    result, report = run(None)
    assert result.ret == 1
    result.assert_outcomes(passed=1, skipped=1, failed=2, xfailed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "*test_skips_for_no_reason_a_gpu_agent_accepts*",
            "*skipped on a machine with a CUDA device: needs a CUDA GPU*",
        ]
    )
    assert "test_skips_naming_an_installed_package" in result.stdout.str()
    last = [x for x in result.outlines if x.strip()][-1]
    assert last == (
        "CUDA device present: 2 GPU tests ran, 1 skipped for a missing optional package, "
        "2 failed or errored"
    )
    assert report["cuda"]["device"] == {"name": "Fake H100"}
    outcomes = {t["nodeid"].rpartition("::")[2]: t["outcome"] for t in report["tests"]}
    assert outcomes == {
        "test_runs": "passed",
        "test_skips_for_no_reason_a_gpu_agent_accepts": "failed",
        "test_skips_for_a_missing_optional_package": "skipped",
        "test_skips_naming_an_installed_package": "failed",
        "test_expected_failure": "xfailed",
    }
    peaks = {t["nodeid"].rpartition("::")[2]: t["memory"] for t in report["tests"]}
    assert peaks["test_runs"] == {"memory_peak_bytes": 96 << 20}
    assert (pytester.path / "reports" / "memory-gpu.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("needs CUDA and flashinfer-python (make test-gpu)", "flashinfer"),
        ("nvidia-ml-py is not installed (pip install '.[gpu]')", "pynvml"),
        ("could not import 'vllm': No module named 'vllm'", "vllm"),
        ("needs a CUDA GPU: torch.cuda.is_available() is False", None),
        ("", None),
    ],
)
def test_which_skip_reasons_name_a_missing_package(reason: str, expected: str | None) -> None:
    assert gate.missing_package_named(reason) == expected


def test_the_plot_of_peaks_is_written(tmp_path: Path) -> None:
    peaks = {"suites/a.py::test_mlp": 40 << 20, "suites/a.py::test_kv_copy": 300 << 20}
    path = gate.plot_peaks(peaks, tmp_path / "memory-gpu.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- a skip inside a body is a skip; --require-gpu (make test-gpu REQUIRE_GPU=1) can fail --------

BODY_SKIPS = """
import pytest

@pytest.mark.gpu
def test_needs_vllm_and_skips_in_its_body():
    pytest.skip("needs CUDA and vLLM (missing ['vllm']); set VLLM_PYTHON to such an interpreter")
"""
RUNS = """
import pytest

@pytest.mark.gpu
def test_reproduces(record_property):
    record_property("repro_out_of_memory", "Tried to allocate 2.12 GiB")
"""


def _gate_run(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tests: str,
    unavailable: str | None,
    *extra: str,
) -> tuple[pytest.RunResult, dict[str, Any], str]:
    pytester.makepyfile(test_gpu=tests)
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs CUDA\n")
    monkeypatch.setattr(gate, "cuda_unavailable_reason", lambda: unavailable)
    monkeypatch.setattr(gate, "cuda_device_summary", lambda: {"name": "Fake H100"})
    report = pytester.path / "memory-gpu.json"
    junit = pytester.path / "junit-gpu.xml"
    result = pytester.runpytest(*ARGS, f"--gpu-report={report}", f"--junitxml={junit}", *extra)
    return result, json.loads(report.read_text()), junit.read_text()


def _last_line(result: pytest.RunResult) -> str:
    return [x for x in result.outlines if x.strip()][-1]


def test_a_skip_inside_a_body_counts_as_a_skip_not_a_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 20: with CUDA visible and no vLLM installed, the gate said "GPU tests ran".
    result, report, _ = _gate_run(pytester, monkeypatch, BODY_SKIPS, None)
    assert result.ret == 0  # without --require-gpu a missing optional package is a skip
    result.assert_outcomes(skipped=1)
    assert _last_line(result).startswith("CUDA device present: 0 GPU tests ran, 1 skipped")
    assert report["summary"]["ran"] == 0
    assert report["tests"][0]["ran"] is False


@pytest.mark.parametrize(
    ("tests", "unavailable", "line"),
    [
        (
            RUNS,
            "torch is built without CUDA",
            "gpu gate: FAILED (REQUIRE_GPU): no CUDA device (torch is built without CUDA): "
            "0 GPU tests ran",
        ),
        (
            BODY_SKIPS,
            None,
            "gpu gate: FAILED (REQUIRE_GPU): vllm is not installed: 1 GPU test(s) skipped for "
            "it (first: test_gpu.py::test_needs_vllm_and_skips_in_its_body)",
        ),
        (
            "import pytest\n\n@pytest.mark.gpu\ndef test_x():\n    pytest.skip('flaky')\n",
            None,
            "gpu gate: FAILED (REQUIRE_GPU): no GPU test body ran (1 selected)",
        ),
        (
            "def test_not_gpu():\n    pass\n",
            None,
            "gpu gate: FAILED (REQUIRE_GPU): no GPU test body ran (0 selected)",
        ),
    ],
    ids=["no-cuda", "missing-package", "no-body-ran", "nothing-selected"],
)
def test_require_gpu_fails_with_one_line(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tests: str,
    unavailable: str | None,
    line: str,
) -> None:
    result, report, _ = _gate_run(pytester, monkeypatch, tests, unavailable, "--require-gpu")
    assert result.ret == 1
    assert _last_line(result) == line
    assert sum(1 for x in result.outlines if x.startswith("gpu gate: FAILED")) == 1
    failure = line.removeprefix("gpu gate: FAILED (REQUIRE_GPU): ")
    assert report["require_gpu"] == {"enabled": True, "failure": failure}


def test_require_gpu_passes_when_a_body_ran_and_the_verdict_is_in_the_junit_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, report, junit = _gate_run(pytester, monkeypatch, RUNS, None, "--require-gpu")
    assert result.ret == 0, result.stdout.str()
    assert "gpu gate: FAILED" not in result.stdout.str()
    assert '<property name="repro_out_of_memory" value="Tried to allocate 2.12 GiB"' in junit
    assert report["tests"][0]["memory"] == {"repro_out_of_memory": "Tried to allocate 2.12 GiB"}
    assert set(report["versions"]) == set(gate.VERSIONED)
    assert report["versions"]["torch"] is not None


def test_without_require_gpu_no_cuda_still_exits_0(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, report, _ = _gate_run(pytester, monkeypatch, RUNS, "no driver")
    assert result.ret == 0
    assert _last_line(result) == "no CUDA device: 0 GPU tests ran, 1 skipped (no driver)"
    assert report["require_gpu"] == {"enabled": False, "failure": None}


def test_devices_are_numbered_in_pci_bus_order(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    _, report, _ = _gate_run(pytester, monkeypatch, RUNS, "no driver")
    assert report["cuda_device_order"] == "PCI_BUS_ID"


# --- REQUIRE_GPU's spellings (issue 27, bug 2: `REQUIRE_GPU=True` was a silent off) ---------------


@pytest.mark.parametrize("word", ["1", "true", "True", "TRUE", "yes", "YES", "Yes", "on", " On "])
def test_every_spelling_of_true_turns_the_gate_on(word: str) -> None:
    assert gate.switch(word) is True


@pytest.mark.parametrize("word", ["", "0", "false", "False", "no", "NO", "off", "Off"])
def test_the_spellings_of_false_and_nothing_leave_it_off(word: str) -> None:
    assert gate.switch(word) is False


@pytest.mark.parametrize("word", ["maybe", "2", "ture", "y", "enabled", "-1"])
def test_any_other_word_is_a_usage_error(word: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"REQUIRE_GPU=.* is neither true"):
        gate.switch(word)


@pytest.mark.parametrize("word", ["True", "YES", "on"])
def test_a_spelled_true_fails_the_run_without_cuda(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, word: str
) -> None:
    result, report, _ = _gate_run(pytester, monkeypatch, RUNS, "no driver", f"--require-gpu={word}")
    assert result.ret == 1
    assert _last_line(result).startswith("gpu gate: FAILED (REQUIRE_GPU): no CUDA device (")
    assert report["require_gpu"]["enabled"] is True


def test_an_unknown_word_is_a_usage_error_not_an_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_gpu=RUNS)
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs CUDA\n")
    result = pytester.runpytest(*ARGS, "--require-gpu=maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "REQUIRE_GPU='maybe' is neither true (1, true, yes, on)" in result.stderr.str()


def test_make_passes_require_gpu_to_the_gate_as_it_is() -> None:
    """The Makefile does no parsing of its own: the gate's switch() decides (tested above)."""
    makefile = (ROOT / "Makefile").read_text()
    assert "GPU_GATE_ARGS := '--require-gpu=$(subst ','\\'',$(REQUIRE_GPU))'" in makefile
    (recipe,) = [line for line in makefile.splitlines() if "-p ci.pytest_gpu_gate" in line]
    assert "$(GPU_GATE_ARGS)" in recipe


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.skipif(gate.cuda_unavailable_reason() is None, reason="checks the no-CUDA machine")
@pytest.mark.parametrize(
    ("word", "status", "last"),
    [
        ("1", 2, "gpu gate: FAILED (REQUIRE_GPU): no CUDA device ("),
        ("True", 2, "gpu gate: FAILED (REQUIRE_GPU): no CUDA device ("),
        ("YES", 2, "gpu gate: FAILED (REQUIRE_GPU): no CUDA device ("),
        ("maybe", 2, None),
        ("1' || true '", 2, None),  # a quote in the word: one argument, never shell syntax
        (None, 0, "no CUDA device: 0 GPU tests ran, "),
    ],
    ids=["1", "True", "YES", "maybe", "quoted", "unset"],
)
def test_make_test_gpu_on_a_machine_without_cuda(
    tmp_path: Path, word: str | None, status: int, last: str | None
) -> None:
    """make's own exit status for a failed recipe is 2 (pytest's 1 and 4 both become 2)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env.pop("REQUIRE_GPU", None)
    argv = ["make", "-s", "--no-print-directory", "test-gpu", "PYTHON_ENV=system"]
    argv += [f"PYTHON={sys.executable}", f"REPORTS={tmp_path}"]
    if word is not None:
        argv.append(f"REQUIRE_GPU={word}")
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert done.returncode == status, done.stdout[-2000:] + done.stderr[-2000:]
    if last is None:  # a usage error: pytest says which word, before collecting anything
        assert f"REQUIRE_GPU={word!r} is neither true" in done.stderr
        assert "GPU tests ran" not in done.stdout
        return
    assert [x for x in done.stdout.splitlines() if x.strip()][-1].startswith(last)
