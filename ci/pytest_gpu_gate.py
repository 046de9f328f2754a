"""pytest plugin behind ``make test-gpu`` (``-p ci.pytest_gpu_gate``): a GPU run says what it ran.

- **No CUDA device**: every ``gpu``-marked test is skipped with the reason, and the run prints
  ``no CUDA device: 0 GPU tests ran, N skipped (<why>)`` before the first test and again as its
  very last line, so nobody reads "N skipped" as a GPU run. Exit code 0.
- **A CUDA device**: a skipped ``gpu`` test is a failure, unless its skip reason names an optional
  package (:data:`OPTIONAL_PACKAGES`) that is not installed here: on a GPU agent, "needs CUDA"
  or any other skip means the test did not check what it exists to check.
- ``--gpu-report=PATH`` writes a JSON memory report: the device (torch's and NVML's view, via
  :func:`harness.memory.cuda_probe.probe`), each test's outcome, duration and the ``memory_*``
  properties the harness memory plugin recorded (e.g. ``memory_peak_bytes``), and, when any test
  recorded a peak, a bar chart of the peaks beside it (``PATH`` with ``.png``).
"""

from __future__ import annotations

import importlib.util
import json
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
        self.outcomes: dict[str, _Outcome] = {}
        self.selected = 0

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
            if missing_package_named(reason) is None:
                report.outcome = "failed"
                report.longrepr = (
                    f"skipped on a machine with a CUDA device: {reason}\n"
                    "make test-gpu fails a GPU test that skips there, unless the skip names an "
                    f"optional package that is not installed ({', '.join(OPTIONAL_PACKAGES)})"
                )
                report.user_properties.append((SKIP_PROPERTY, reason))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcome = self.outcomes.setdefault(report.nodeid, _Outcome(report.nodeid))
        outcome.duration_s += report.duration
        for name, value in report.user_properties:
            if name.startswith("memory_"):
                outcome.memory[name] = value
        gated = any(name == SKIP_PROPERTY for name, _ in report.user_properties)
        if report.when == "call" and not gated:
            outcome.ran = True
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

    def pytest_sessionfinish(self) -> None:
        if self.report_path is None:
            return
        path = Path(self.report_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        ran, skipped, failed = self.counts()
        device = None if self.unavailable is not None else cuda_device_summary()
        report = {
            "cuda": {"unavailable_reason": self.unavailable, "device": device},
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
    parser.getgroup("gpu-gate", "make test-gpu (ci.pytest_gpu_gate)").addoption(
        "--gpu-report",
        default=None,
        metavar="PATH",
        help="write the GPU run's memory report (JSON; a .png of the peaks beside it) to PATH",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(GpuGate(config), "gpu-gate")
