"""pytest plugin behind ``make test-gpu`` (``-p ci.pytest_gpu_gate``): a GPU run says what it ran.

- **No CUDA device**: every ``gpu`` test is skipped with the reason; the run prints
  ``no CUDA device: 0 GPU tests ran, N skipped (<why>)`` first and last, and exits 0.
- **A CUDA device**: a skipped ``gpu`` test fails unless its reason names an optional package
  (:data:`OPTIONAL_PACKAGES`) not installed here. A skip inside a test body is a skip, not a run.
- ``--require-gpu[=WORD]`` (``make test-gpu REQUIRE_GPU=WORD``, the GPU pipeline step): when
  WORD says true (:func:`switch`: ``1``, ``true``, ``yes``, ``on``, any case), exit 1 with one
  ``gpu gate: FAILED`` line without a CUDA device, when a GPU test skips for a missing package,
  or when no GPU test body ran. A WORD that is neither true nor false is a usage error.
- ``--gpu-report=PATH``: a JSON report of the device (:func:`harness.memory.cuda_probe.probe`),
  the installed torch/flashinfer/vllm/lm-eval versions, each test's outcome and its ``memory_*``
  and ``repro_*`` properties, and a bar chart of the peaks beside it (``.png``). Devices are
  numbered in PCI bus order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``), as NVML numbers them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from collections.abc import Generator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

OPTIONAL_PACKAGES: dict[str, tuple[str, ...]] = {
    "flashinfer": ("flashinfer", "flashinfer-python"),
    "pynvml": ("pynvml", "nvidia-ml-py"),
    "vllm": ("vllm",),
    "lm_eval": ("lm_eval", "lm-eval"),
}
"""Module -> the names a skip reason may use for it (module or distribution name)."""

SKIP_PROPERTY = "gpu_gate_skip_reason"
"""User property on a report whose skip the gate turned into a failure."""

RECORDED_PREFIXES = ("memory_", "repro_")
"""User properties a test records that the JSON report copies (e.g. ``repro_out_of_memory``)."""

VERSIONED = ("torch", "flashinfer-python", "nvidia-ml-py", "vllm", "lm-eval")
"""Distributions whose installed versions the report records (``None``: not installed)."""


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("", "0", "false", "no", "off")
"""The spellings of ``REQUIRE_GPU`` (compared lower-cased, blanks stripped); nothing else."""


def switch(word: str) -> bool:
    """``REQUIRE_GPU``'s value as on or off; a word in neither list is an ``ArgumentTypeError``
    (pytest's usage error), never a silent off."""
    spelled = word.strip().lower()
    if spelled in TRUE_WORDS:
        return True
    if spelled in FALSE_WORDS:
        return False
    raise argparse.ArgumentTypeError(
        f"REQUIRE_GPU={word!r} is neither true ({', '.join(TRUE_WORDS)}) nor false "
        f"({', '.join(w for w in FALSE_WORDS if w)} or nothing), in any case"
    )


def installed_versions() -> dict[str, str | None]:
    """The version of each :data:`VERSIONED` distribution installed here, or ``None``."""
    import importlib.metadata

    versions: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cuda_unavailable_reason() -> str | None:
    """Why there is no usable CUDA device here, or ``None`` when there is one."""
    try:
        from harness.memory.cuda_probe import cuda_unavailable_reason as reason
    except ModuleNotFoundError as exc:
        return f"{exc.name} is not installed"
    return reason()


def cuda_device_summary() -> dict[str, Any]:
    """Device name and memory counters (torch and NVML) of CUDA device 0."""
    from harness.memory.cuda_probe import probe

    return asdict(probe())


def missing_package_named(reason: str) -> str | None:
    """The optional package that ``reason`` names and that is not installed here, or ``None``."""
    lowered = reason.lower()
    for module, names in OPTIONAL_PACKAGES.items():
        if any(name in lowered for name in names) and importlib.util.find_spec(module) is None:
            return module
    return None


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@dataclass
class _Outcome:
    nodeid: str
    outcome: str = "passed"
    duration_s: float = 0.0
    ran: bool = False
    memory: dict[str, object] = field(default_factory=dict[str, object])


class GpuGate:
    """The plugin's state for one run (see the module docstring)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.unavailable = cuda_unavailable_reason()
        self.report_path: str | None = config.getoption("gpu_report")
        self.require = bool(config.getoption("require_gpu"))
        self.outcomes: dict[str, _Outcome] = {}
        self.missing: dict[str, list[str]] = {}
        """Missing optional package -> the GPU tests that skipped for it."""
        self.selected = 0
        self.failure: str | None = None

    def _line(self, ran: int, skipped: int, failed: int) -> str:
        if self.unavailable is not None:
            return f"no CUDA device: {ran} GPU tests ran, {skipped} skipped ({self.unavailable})"
        return (
            f"CUDA device present: {ran} GPU tests ran, {skipped} skipped for a missing "
            f"optional package, {failed} failed or errored"
        )

    def _write_line(self, text: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(text, bold=True)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if self.unavailable is None:
            return
        skip = pytest.mark.skip(reason=f"no CUDA device: {self.unavailable}")
        for item in items:
            if item.get_closest_marker("gpu") is not None:
                item.add_marker(skip)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.selected = sum(1 for i in session.items if i.get_closest_marker("gpu") is not None)
        if self.unavailable is not None:
            self._write_line(self._line(0, self.selected, 0))
        else:
            self._write_line(
                f"CUDA device present: {self.selected} GPU tests selected; a skip fails unless it "
                "names a missing optional package"
            )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if (
            self.unavailable is None
            and report.skipped
            and not hasattr(report, "wasxfail")
            and item.get_closest_marker("gpu") is not None
        ):
            reason = _skip_reason(report)
            missing = missing_package_named(reason)
            if missing is not None:
                self.missing.setdefault(missing, []).append(item.nodeid)
            if missing is None or self.require:
                report.outcome = "failed"
                report.longrepr = (
                    f"skipped on a machine with a CUDA device: {reason}\n"
                    "make test-gpu fails a GPU test that skips there, unless the skip names an "
                    f"optional package that is not installed ({', '.join(OPTIONAL_PACKAGES)}); "
                    "with REQUIRE_GPU on that fails too"
                )
                report.user_properties.append((SKIP_PROPERTY, reason))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcome = self.outcomes.setdefault(report.nodeid, _Outcome(report.nodeid))
        outcome.duration_s += report.duration
        for name, value in report.user_properties:
            if name.startswith(RECORDED_PREFIXES):
                outcome.memory[name] = value
        gated = any(name == SKIP_PROPERTY for name, _ in report.user_properties)
        body_ran = not report.skipped or hasattr(report, "wasxfail")  # xfail: it ran and failed
        if report.when == "call" and body_ran and not gated:
            outcome.ran = True  # a skip inside the body is a skip, not a run
        if hasattr(report, "wasxfail"):
            outcome.outcome = "xfailed" if report.skipped else "xpassed"
        elif report.skipped and outcome.outcome == "passed":
            outcome.outcome = "skipped"
        elif report.failed:
            outcome.outcome = "failed" if report.when == "call" else "error"

    def counts(self) -> tuple[int, int, int]:
        """(ran, skipped, failed or errored) over the tests seen so far."""
        values = list(self.outcomes.values())
        ran = sum(1 for o in values if o.ran)
        skipped = sum(1 for o in values if o.outcome == "skipped")
        failed = sum(1 for o in values if o.outcome in ("failed", "error"))
        return ran, skipped, failed

    def required_failure(self) -> str | None:
        """Why a ``--require-gpu`` run fails, or ``None`` (also ``None`` without the flag)."""
        if not self.require:
            return None
        if self.unavailable is not None:
            return f"no CUDA device ({self.unavailable}): 0 GPU tests ran"
        if self.missing:
            module, nodeids = sorted(self.missing.items())[0]
            distribution = OPTIONAL_PACKAGES.get(module, (module,))[-1]
            return (
                f"{distribution} is not installed: {len(nodeids)} GPU test(s) skipped for it "
                f"(first: {nodeids[0]})"
            )
        ran = self.counts()[0]
        if ran == 0:
            return f"no GPU test body ran ({self.selected} selected)"
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.failure = self.required_failure()
        passing = (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
        if self.failure is not None and session.exitstatus in passing:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        self._write_report()

    def _write_report(self) -> None:
        if self.report_path is None:
            return
        path = Path(self.report_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        ran, skipped, failed = self.counts()
        device = None if self.unavailable is not None else cuda_device_summary()
        report = {
            "cuda": {"unavailable_reason": self.unavailable, "device": device},
            "versions": installed_versions(),
            "cuda_device_order": os.environ.get("CUDA_DEVICE_ORDER"),
            "require_gpu": {"enabled": self.require, "failure": self.failure},
            "summary": {
                "selected": self.selected,
                "ran": ran,
                "skipped": skipped,
                "failed_or_errored": failed,
            },
            "tests": [asdict(o) for o in self.outcomes.values()],
        }
        path.write_text(json.dumps(report, indent=2, default=str) + "\n")
        peaks = {
            o.nodeid: o.memory["memory_peak_bytes"]
            for o in self.outcomes.values()
            if isinstance(o.memory.get("memory_peak_bytes"), int)
        }
        if peaks:
            plot_peaks(peaks, path.with_suffix(".png"))

    def pytest_unconfigure(self) -> None:
        self._write_line(self._line(*self.counts()))
        if self.failure is not None:
            self._write_line(f"gpu gate: FAILED (REQUIRE_GPU): {self.failure}")


def plot_peaks(peaks: dict[str, Any], path: Path) -> Path:
    """A horizontal bar chart of each test's peak device memory (MiB) at ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = [nodeid.rpartition("::")[2] for nodeid in peaks]
    mib = [int(v) / (1 << 20) for v in peaks.values()]
    figure = Figure(figsize=(9, 1.2 + 0.35 * len(names)), layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    bars = ax.barh(names, mib, color="tab:blue")  # pyright: ignore[reportUnknownMemberType]
    ax.bar_label(bars, labels=[f"{v:,.1f} MiB" for v in mib], padding=3)  # pyright: ignore[reportUnknownMemberType]
    ax.margins(x=0.15)
    ax.invert_yaxis()
    ax.set_xlabel("peak memory during the test body (MiB)")  # pyright: ignore[reportUnknownMemberType]
    ax.set_title("make test-gpu: memory_peak_bytes per budgeted test")  # pyright: ignore[reportUnknownMemberType]
    figure.savefig(path, dpi=110)  # pyright: ignore[reportUnknownMemberType]
    return path


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpu-gate", "make test-gpu (ci.pytest_gpu_gate)")
    group.addoption(
        "--require-gpu",
        nargs="?",
        const=True,
        default=False,
        type=switch,
        metavar="WORD",
        help="with no WORD or a true one (1, true, yes, on; any case): fail (exit 1) without a "
        "CUDA device, when a GPU test skips for a missing package, or when no GPU test body ran; "
        "0, false, no, off or an empty WORD: off; any other WORD is a usage error "
        "(make test-gpu REQUIRE_GPU=WORD)",
    )
    group.addoption(
        "--gpu-report",
        default=None,
        metavar="PATH",
        help="write the GPU run's memory report (JSON; a .png of the peaks beside it) to PATH",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Before anything initialises CUDA: number devices in PCI bus order, as NVML and nvidia-smi
    # do, so "device 0" of a test and of the memory report is one physical GPU (CUDA's default
    # order is fastest first). cuda_probe also maps devices to NVML by PCI bus id.
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    config.pluginmanager.register(GpuGate(config), "gpu-gate")
