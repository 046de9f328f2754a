"""pytest plugin (``pytest11`` entry point ``harness_memory``): memory budgets for tests.

- Marker ``@pytest.mark.memory_budget(peak="64 MiB", device="cpu")`` bounds the peak of live tensor
  bytes in the test body; ``device`` is ``cpu``, ``meta:<profile>`` (a simulated GPU) or ``cuda``
  (skipped with the reason where there is none). A failure lists the largest live allocations.
- Fixture ``harness_memory_tracker``: a fresh :class:`~harness.memory.tracker.MemoryTracker`.
- A peak higher than the last green run's (``config.cache``) is reported, and fails the test with
  ``--memory-fail-on-increase``. Each option has an ini twin (:func:`value_or_ini`).

Only pytest and the standard library are imported at startup; details in ``docs/simulation.md``.
"""

from __future__ import annotations

import contextlib
import inspect
import math
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
    from harness.memory.cuda_probe import CudaPeak
    from harness.memory.tracker import MemoryTracker

CACHE_PREFIX = "harness_memory/peak/"
"""``config.cache`` key prefix; the rest is the test's node id."""

ENGINE_INSTALL_HINT = "pip install 'attn-metadata-harness[engine]'"
"""What to install when torch is missing."""

_MEASUREMENT = pytest.StashKey[Measurement]()
_BUDGET = pytest.StashKey[int]()
_TRACKER = pytest.StashKey["MemoryTracker"]()
_PEAK_PROPERTY = "memory_peak_bytes"
_INCREASE_PROPERTY = "memory_peak_increase"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness-memory", "memory budgets (harness.memory)")
    group.addoption(
        "--memory-top",
        type=int,
        help="allocations live at the peak to list for a failing memory budget (default 5)",
    )
    parser.addini("memory_top", "default for --memory-top", default="5")
    group.addoption(
        "--memory-fail-on-increase",
        action="store_true",
        default=None,
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


def check_settings(config: pytest.Config) -> None:
    """``memory_top`` and ``memory_increase_tolerance`` (flag or ini) as numbers the plugin can
    use; anything else is one usage error at start-up, not a traceback in every budgeted test."""
    for key, flag in (
        ("memory_top", "--memory-top"),
        ("memory_increase_tolerance", "--memory-increase-tolerance"),
    ):
        text = str(value_or_ini(config, key)).strip()
        name = flag if config.getoption(key) is not None else key
        if key == "memory_top":
            if not (text.lstrip("+").isdigit() and int(text) >= 1):
                raise pytest.UsageError(f"{name}: expected a positive integer, got {text!r}")
            continue
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not (math.isfinite(number) and number >= 0):
            raise pytest.UsageError(
                f"{name}: expected a number >= 0 (a relative increase, e.g. 0.05), got {text!r}"
            )


def pytest_configure(config: pytest.Config) -> None:
    check_settings(config)
    config.addinivalue_line("markers", marker_help("memory_budget", memory_budget))
    config.pluginmanager.register(_IncreaseReport(), "harness-memory-increases")


def parse_budget(marker: pytest.Mark) -> tuple[int, BudgetDevice]:
    """The marker's peak in bytes and device, checked before the body runs (else HarnessError)."""
    parameters = inspect.signature(memory_budget).parameters
    public = [name for name in parameters if not name.startswith("_")]  # _name: the plugin's
    takes = f"memory_budget takes {', '.join(public)}"
    unknown = [name for name in marker.kwargs if name not in public]
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        raise HarnessError(f"invalid memory_budget arguments: unknown {names} ({takes})")
    if len(marker.args) > len(public):
        raise HarnessError(
            f"invalid memory_budget arguments: {len(marker.args)} positional ({takes})"
        )
    arguments = dict(zip(public, marker.args, strict=False))
    for name, value in marker.kwargs.items():
        if name in arguments:
            raise HarnessError(f"invalid memory_budget arguments: {name!r} given twice")
        arguments[name] = value
    if "peak" not in arguments:
        raise HarnessError("memory_budget needs a peak, e.g. memory_budget(peak='64 MiB')")
    peak: object = arguments["peak"]
    if not isinstance(peak, (str, int)):
        raise HarnessError(f"invalid memory_budget peak {peak!r}: expected e.g. '64 MiB'")
    return parse_size(peak), parse_budget_device(str(arguments.get("device", "cpu")))


def require_torch(what: str) -> None:
    """Fail the test with one line, no traceback, when torch cannot be imported."""
    try:
        import torch  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError as exc:
        message = f"{what} needs torch, which is not importable ({exc}): {ENGINE_INSTALL_HINT}"
        pytest.fail(message, pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Measure the call phase of every kind of test item: a function's body, and a
    ``unittest.TestCase`` method with its ``setUp`` and ``tearDown`` (which pytest runs as one
    call, outside ``pytest_pyfunc_call``)."""
    marker = item.get_closest_marker("memory_budget")
    if marker is None:
        return (yield)
    try:
        budget_bytes, device = parse_budget(marker)
    except HarnessError as exc:
        pytest.fail(str(exc), pytrace=False)
    item.stash[_BUDGET] = budget_bytes
    top = int(value_or_ini(item.config, "memory_top"))
    require_torch("memory_budget")
    import torch

    from harness.memory.ledger import Ledger
    from harness.memory.sim_allocator import SimulatedDevice
    from harness.memory.tracker import MemoryTracker

    cuda_peak: CudaPeak | None = None
    if device.kind == "cuda":
        from harness.memory.cuda_probe import CudaPeak, cuda_unavailable_reason

        reason = cuda_unavailable_reason()
        if reason is not None:
            pytest.skip(f"memory_budget(device='cuda') needs a GPU: {reason}")
        cuda_peak = CudaPeak()
    ledger = Ledger(capacity=None if device.profile is None else SimulatedDevice(device.profile))
    tracker = MemoryTracker(ledger, devices=(device.kind,))
    default_device: contextlib.AbstractContextManager[object] = (
        torch.device("meta") if device.kind == "meta" else contextlib.nullcontext()
    )
    try:  # every thread's allocations count (tracker docstring)
        with cuda_peak or contextlib.nullcontext(), tracker, default_device:
            return (yield)
    finally:  # also when the body failed (e.g. a simulated OOM): the report shows the peak
        item.stash[_MEASUREMENT] = Measurement(
            device=device,
            peak_bytes=ledger.peak_bytes if cuda_peak is None else cuda_peak.peak_bytes,
            method="tracker (live storage bytes)"
            if cuda_peak is None
            else "torch.cuda.max_memory_allocated",
            top_allocations=tuple(ledger.peak_allocations(top)),
            peak_region=ledger.peak_region,
        )


@pytest.fixture
def harness_memory_tracker(request: pytest.FixtureRequest) -> MemoryTracker:
    """A fresh MemoryTracker (cpu and meta tensors); ``with harness_memory_tracker: ...`` measures."""
    require_torch("harness_memory_tracker")
    from harness.memory.tracker import MemoryTracker

    tracker = MemoryTracker()
    request.node.stash[_TRACKER] = tracker
    return tracker


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when != "call":
        return report
    try:
        _add_measurements(item, report)
    except Exception as exc:  # a bug here must fail this test, not stop the session
        report.outcome = "failed"
        report.longrepr = f"harness memory plugin failed on this test: {type(exc).__name__}: {exc}"
    return report


def _add_measurements(item: pytest.Item, report: pytest.TestReport) -> None:
    measurement = item.stash.get(_MEASUREMENT, None)
    budget = item.stash.get(_BUDGET, None)
    if measurement is not None and budget is not None:
        _judge(item, report, budget, measurement)
    if not report.failed:
        return
    tracker = item.stash.get(_TRACKER, None)
    if tracker is not None and tracker.ledger.num_allocations:
        top = int(value_or_ini(item.config, "memory_top"))
        report.sections.append(("memory tracker", tracker.ledger.summary(top)))


def _judge(
    item: pytest.Item, report: pytest.TestReport, budget_bytes: int, measurement: Measurement
) -> None:
    report.user_properties.append((_PEAK_PROPERTY, measurement.peak_bytes))
    if report.failed:  # the body raised (e.g. an out-of-memory error): show what was live
        report.sections.append(("memory budget", describe_measurement(measurement)))
        return
    exceeded = memory_budget(budget_bytes, str(measurement.device), _measurement=measurement)
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
