"""pytest plugin (``pytest11`` entry point ``harness_memory``): memory budgets for tests.

- Marker ``@pytest.mark.memory_budget(peak="64 MiB", device="cpu")`` bounds the peak of live tensor
  bytes allocated during the test body (fixtures are outside it). ``device`` is ``cpu``,
  ``meta:<profile>`` (e.g. ``meta:h100-95``: ``meta`` is the default device inside the body, and a
  simulated GPU of that profile raises torch's out-of-memory error when it is full) or ``cuda``
  (torch's ``max_memory_allocated``; without CUDA the test is skipped with the reason, never passed).
  A failure lists the largest allocations live at the peak with op and source line.
- Fixture ``memory_tracker``: a fresh :class:`~harness.memory.tracker.MemoryTracker` (cpu and meta)
  to measure a region (``with memory_tracker: ...``; the numbers are ``memory_tracker.ledger``'s);
  its summary is added to a failing report.
- Threads: a budgeted body's allocations count from every Python thread, those it starts and
  those that already existed (a thread pool's workers), not only the test's own thread.
- "Worse than the last green run": each budgeted test's peak is kept in ``config.cache``; a higher
  peak is reported in the terminal summary, and fails the test with ``--memory-fail-on-increase``.

Options (one group; every flag has an ini twin, resolved by :func:`value_or_ini`):
``--memory-top`` / ``memory_top``, ``--memory-fail-on-increase`` / ``memory_fail_on_increase``,
``--memory-increase-tolerance`` / ``memory_increase_tolerance``.

Only pytest and the stdlib are imported at startup; torch is imported when a budgeted test runs.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import pytest

from harness.errors import HarnessError
from harness.memory.marks import (
    BudgetDevice,
    Measurement,
    compare_with_last_green,
    describe_measurement,
    memory_budget,
    parse_budget_device,
)
from harness.memory.sizes import parse_size

if TYPE_CHECKING:
    from harness.memory.tracker import MemoryTracker

MARKERS: dict[str, Callable[..., object]] = {"memory_budget": memory_budget}
"""Marker name -> the pure function that implements it (its signature is the marker's help)."""

CACHE_PREFIX = "harness_memory/peak/"
"""``config.cache`` key prefix; the rest is the test's node id."""

_MEASUREMENT = pytest.StashKey[Measurement]()
_PEAK_PROPERTY = "memory_peak_bytes"
_INCREASE_PROPERTY = "memory_peak_increase"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness-memory", "memory budgets (harness.memory)")
    group.addoption(
        "--memory-top",
        type=int,
        default=None,
        dest="memory_top",
        help="allocations live at the peak to list for a failing memory budget (default 5)",
    )
    parser.addini("memory_top", "default for --memory-top", default="5")
    group.addoption(
        "--memory-fail-on-increase",
        action="store_true",
        default=None,
        dest="memory_fail_on_increase",
        help="fail a budgeted test whose peak is worse than in its last green run",
    )
    parser.addini(
        "memory_fail_on_increase",
        "default for --memory-fail-on-increase",
        type="bool",
        default=False,
    )
    group.addoption(
        "--memory-increase-tolerance",
        type=float,
        default=None,
        dest="memory_increase_tolerance",
        help="relative peak increase over the last green run that is still fine (default 0.0)",
    )
    parser.addini(
        "memory_increase_tolerance", "default for --memory-increase-tolerance", default="0.0"
    )


def value_or_ini(config: pytest.Config, key: str) -> Any:
    """The command-line value of ``key`` if given, else its ini value."""
    value = config.getoption(key)
    return config.getini(key) if value is None else value


def marker_help(name: str, func: Callable[..., object]) -> str:
    """``name(arg, arg=default): first docstring line`` from the function's public parameters."""
    params = [
        p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
        for p in inspect.signature(func).parameters.values()
        if not p.name.startswith("_")
    ]
    doc = (inspect.getdoc(func) or "").strip()
    return f"{name}({', '.join(params)}): {doc.splitlines()[0] if doc else ''}"


def pytest_configure(config: pytest.Config) -> None:
    for name, func in MARKERS.items():
        config.addinivalue_line("markers", marker_help(name, func))
    config.pluginmanager.register(_IncreaseReport(), "harness-memory-increases")


def _validate(marker: pytest.Mark) -> BudgetDevice:
    """Check the marker's arguments before the body runs; bad ones are a HarnessError."""
    try:
        bound = inspect.signature(memory_budget).bind_partial(*marker.args, **marker.kwargs)
    except TypeError as exc:
        raise HarnessError(f"invalid memory_budget arguments: {exc}") from None
    if "peak" not in bound.arguments:
        raise HarnessError("memory_budget needs a peak, e.g. memory_budget(peak='64 MiB')")
    parse_size(bound.arguments["peak"])
    return parse_budget_device(str(bound.arguments.get("device", "cpu")))


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    marker = pyfuncitem.get_closest_marker("memory_budget")
    if marker is None:
        return (yield)
    try:
        device: BudgetDevice | str = _validate(marker)
    except HarnessError as exc:
        device = str(exc)
    if isinstance(device, str):
        pytest.fail(device, pytrace=False)
    top = int(value_or_ini(pyfuncitem.config, "memory_top"))
    if device.kind == "cuda":
        return (yield from _run_on_cuda(pyfuncitem, device, top))
    import torch

    from harness.memory.ledger import Ledger
    from harness.memory.sim_allocator import SimulatedDevice
    from harness.memory.tracker import MemoryTracker

    if device.kind == "meta":
        assert device.profile is not None
        ledger = Ledger(capacity=SimulatedDevice(device.profile))
        tracker = MemoryTracker(ledger, devices=("meta",))
        default_device: contextlib.AbstractContextManager[object] = torch.device("meta")
    else:
        ledger = Ledger()
        tracker = MemoryTracker(ledger, devices=("cpu",))
        default_device = contextlib.nullcontext()
    try:
        with tracker, default_device:  # every thread's allocations count (tracker docstring)
            return (yield)
    finally:  # also when the body failed (e.g. a simulated OOM): the report shows the peak
        pyfuncitem.stash[_MEASUREMENT] = Measurement(
            device=device,
            peak_bytes=ledger.peak_bytes,
            method="tracker (live storage bytes)",
            top_allocations=tuple(ledger.peak_allocations(top)),
            peak_region=ledger.peak_region,
        )


def _run_on_cuda(
    item: pytest.Function, device: BudgetDevice, top: int
) -> Generator[None, object, object]:
    from harness.memory.cuda_probe import CudaPeak, cuda_unavailable_reason
    from harness.memory.tracker import MemoryTracker

    reason = cuda_unavailable_reason()
    if reason is not None:
        pytest.skip(f"memory_budget(device='cuda') needs a GPU: {reason}")
    tracker = MemoryTracker(devices=("cuda",))
    peak = CudaPeak()
    try:
        with peak, tracker:
            return (yield)
    finally:
        item.stash[_MEASUREMENT] = Measurement(
            device=device,
            peak_bytes=peak.peak_bytes,
            method="torch.cuda.max_memory_allocated",
            top_allocations=tuple(tracker.ledger.peak_allocations(top)),
            peak_region=tracker.ledger.peak_region,
        )


@pytest.fixture
def memory_tracker() -> MemoryTracker:
    """A fresh MemoryTracker (cpu and meta tensors); ``with memory_tracker: ...`` measures."""
    from harness.memory.tracker import MemoryTracker

    return MemoryTracker(devices=("cpu", "meta"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when != "call":
        return report
    measurement = item.stash.get(_MEASUREMENT, None)
    marker = item.get_closest_marker("memory_budget")
    if measurement is not None and marker is not None:
        _judge(item, report, marker, measurement)
    tracker = getattr(item, "funcargs", {}).get("memory_tracker")
    if report.failed and tracker is not None and tracker.ledger.num_allocations:
        top = int(value_or_ini(item.config, "memory_top"))
        report.sections.append(("memory tracker", tracker.ledger.summary(top)))
    return report


def _judge(
    item: pytest.Item, report: pytest.TestReport, marker: pytest.Mark, measurement: Measurement
) -> None:
    report.user_properties.append((_PEAK_PROPERTY, measurement.peak_bytes))
    if report.failed:  # the body raised (e.g. an out-of-memory error): show what was live
        report.sections.append(("memory budget", describe_measurement(measurement)))
        return
    exceeded = memory_budget(*marker.args, **marker.kwargs, _measurement=measurement)
    if exceeded is not None:
        report.sections.append(exceeded.section)
        if report.passed:
            report.outcome = "failed"
            report.longrepr = exceeded.long_repr
        return
    if not report.passed:
        return
    config = item.config
    cache = getattr(config, "cache", None)
    if cache is None:  # -p no:cacheprovider: nothing to compare with
        return
    key = CACHE_PREFIX + item.nodeid
    cached: object = cache.get(key, None)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    previous = cached if isinstance(cached, int) else None
    tolerance = float(value_or_ini(config, "memory_increase_tolerance"))
    increase = compare_with_last_green(measurement.peak_bytes, previous, tolerance)
    cache.set(key, measurement.peak_bytes)
    if increase is None:
        return
    report.user_properties.append((_INCREASE_PROPERTY, increase.text))
    if bool(value_or_ini(config, "memory_fail_on_increase")):
        cache.set(key, previous)  # a failing run is not green: keep the old baseline
        report.outcome = "failed"
        report.longrepr = f"memory peak increased: {increase.text}"


class _IncreaseReport:
    """Collects "worse than the last green run" lines (also from xdist workers) for the summary."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == _INCREASE_PROPERTY:
                self.lines.append(f"{report.nodeid}: {value}")

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.lines:
            terminalreporter.section("memory peaks worse than the last green run")
            for line in self.lines:
                terminalreporter.write_line(line)
