"""The ``memory_budget`` marker as a pure function over a measurement (no pytest, no torch import).

:func:`memory_budget`'s signature and docstring are the marker's ``--markers`` help.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from harness.errors import HarnessError
from harness.memory.sizes import format_size, parse_size

if TYPE_CHECKING:
    from harness.memory.allocation import Allocation

DeviceKind = Literal["cpu", "meta", "cuda"]


@dataclass(frozen=True, slots=True)
class BudgetDevice:
    """Where a budgeted test body allocates: ``cpu``, ``meta`` on a simulated GPU, or ``cuda``."""

    kind: DeviceKind
    profile: str | None = None
    """Simulated GPU profile for ``meta`` (e.g. ``h100-95``), else ``None``."""

    def __str__(self) -> str:
        return f"meta:{self.profile}" if self.kind == "meta" else self.kind


def parse_budget_device(text: str) -> BudgetDevice:
    """Parse the marker's ``device``: ``cpu``, ``cuda`` or ``meta:<profile>``."""
    if text in ("cpu", "cuda"):
        return BudgetDevice("cpu" if text == "cpu" else "cuda")
    kind, _, profile = text.partition(":")
    if kind == "meta" and profile:
        from harness.memory.devices import get_device_profile

        get_device_profile(profile)  # unknown names fail here, listing the known ones
        return BudgetDevice("meta", profile)
    raise HarnessError(
        f"invalid memory_budget device {text!r}: expected 'cpu', 'cuda' or 'meta:<profile>' "
        "(e.g. 'meta:h100-95')"
    )


@dataclass(frozen=True, slots=True)
class Measurement:
    """The peak of one test body and what was live at that peak."""

    device: BudgetDevice
    peak_bytes: int
    method: str
    """How ``peak_bytes`` was measured, e.g. ``tracker`` or ``torch.cuda.max_memory_allocated``."""
    top_allocations: tuple[Allocation, ...] = ()
    peak_region: str | None = None


@dataclass(frozen=True, slots=True)
class BudgetExceeded:
    """A test body whose peak went over its budget."""

    budget_bytes: int
    measurement: Measurement

    @property
    def long_repr(self) -> str:
        """One line for the failure: peak, budget, excess, device."""
        m = self.measurement
        excess = m.peak_bytes - self.budget_bytes
        return (
            f"memory budget exceeded on {m.device}: peak {format_size(m.peak_bytes)} "
            f"({m.peak_bytes} bytes) > budget {format_size(self.budget_bytes)} "
            f"({self.budget_bytes} bytes) by {format_size(excess)}"
        )

    @property
    def section(self) -> tuple[str, str]:
        """Report section: what was live at the peak, largest first, with op and source."""
        return ("memory budget", describe_measurement(self.measurement))


def describe_measurement(measurement: Measurement) -> str:
    """Peak, method and the allocations live at the peak (two lines each: what, source text)."""
    where = f" in region {measurement.peak_region!r}" if measurement.peak_region else ""
    lines = [
        f"peak {format_size(measurement.peak_bytes)} on {measurement.device} "
        f"(measured by {measurement.method}){where}"
    ]
    if measurement.top_allocations:
        lines.append(
            f"largest allocations live at the peak (top {len(measurement.top_allocations)}):"
        )
    for allocation in measurement.top_allocations:
        lines.append("  " + allocation.describe())
        if allocation.source is not None and allocation.source.text:
            lines.append(f"  {'':>12}    {allocation.source.text}")
    return "\n".join(lines)


def memory_budget(
    peak: str | int,
    device: str = "cpu",
    *,
    _measurement: Measurement,
) -> BudgetExceeded | None:
    """Fail when the test body's peak of live tensor bytes exceeds ``peak`` ("64 MiB", "2 GB").

    ``device``: ``cpu`` (CPU tensors), ``meta:<profile>`` (meta tensors, the default device
    inside the body, on a simulated GPU that raises torch's out-of-memory error when full) or
    ``cuda`` (torch's max_memory_allocated; skipped with a reason without CUDA).
    """
    budget = parse_size(peak)
    if _measurement.peak_bytes > budget:
        return BudgetExceeded(budget, _measurement)
    return None


@dataclass(frozen=True, slots=True)
class PeakIncrease:
    """This run's peak is above the last green run's by more than the tolerance."""

    peak_bytes: int
    previous_bytes: int

    @property
    def text(self) -> str:
        """One line: new peak, previous peak, relative increase."""
        ratio = self.peak_bytes / self.previous_bytes if self.previous_bytes else float("inf")
        return (
            f"peak {format_size(self.peak_bytes)} is worse than the last green run's "
            f"{format_size(self.previous_bytes)} (x{ratio:.3f}, +"
            f"{format_size(self.peak_bytes - self.previous_bytes)})"
        )


def compare_with_last_green(
    peak_bytes: int, previous_bytes: int | None, tolerance: float
) -> PeakIncrease | None:
    """A :class:`PeakIncrease` when ``peak_bytes > previous_bytes * (1 + tolerance)``."""
    if previous_bytes is None or peak_bytes <= previous_bytes * (1 + tolerance):
        return None
    return PeakIncrease(peak_bytes, previous_bytes)
