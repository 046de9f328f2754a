"""``make test-gpu``'s gate, with CUDA absent and with CUDA faked present (pytester, in process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ci import pytest_gpu_gate as gate

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
