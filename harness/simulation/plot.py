# pyright: reportUnknownMemberType=false
# (matplotlib annotates **kwargs without types)
"""Draw a simulation as a person reads it: where the device's memory went, then the zoomed story.

Left, the whole device: weights and buffers, the KV cache, what is left for serving steps and the
memory outside torch; a bracket marks the range the right panel zooms into. Right: after an
out-of-memory error the failing step's live bytes event by event, ending in the allocation that
does not fit; after a clean run each step's peak and end-of-step bytes, with the capacity and
``gpu_memory_utilization`` lines labelled in the margin.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from harness.errors import HarnessError
from harness.memory.sizes import GiB, format_size

if TYPE_CHECKING:
    from harness.memory.allocation import Allocation
    from harness.simulation.simulate import SimulationResult, StepEvents

WEIGHTS_COLOR = "#4C72B0"
KV_COLOR = "#55A868"
HEADROOM_COLOR = "#F2F2F2"
NON_TORCH_COLOR = "#8C8C8C"
OOM_COLOR = "#C44E52"
SITE_COLORS = ("#DD8452", "#8172B3", "#937860", "#DA8BC3", "#CCB974", "#64B5CD")
BIG_SHARE = 0.03
"""An allocation at least this share of the zoomed range gets its own coloured bar."""
LABEL_GAP_POINTS = 11.0
"""Minimum vertical distance between two margin labels."""


def check_plot_path(path: str | Path) -> Path:
    """``path`` as a ``Path`` if a PNG can be written there (checked, leaving nothing behind);
    otherwise a :class:`HarnessError`.
    """
    out = Path(path)
    if out.suffix.lower() != ".png":
        raise HarnessError(f"--plot writes a PNG; {str(out)!r} does not end in .png")
    if not out.parent.is_dir():
        raise HarnessError(f"cannot write {str(out)!r}: {str(out.parent)!r} is not a directory")
    if out.is_dir():
        raise HarnessError(f"cannot write {str(out)!r}: it is a directory")
    existed = out.exists()
    try:
        with open(out, "ab"):
            pass
    except OSError as exc:
        raise HarnessError(f"cannot write {str(out)!r}: {exc.strerror or exc}") from None
    if not existed:
        os.unlink(out)
    return out


@dataclass(frozen=True)
class _Line:
    """A horizontal reference line and its margin label."""

    y: float
    label: str
    color: str
    style: str


def plot_simulation(result: SimulationResult, path: str | Path) -> Path:
    """Write a PNG of ``result`` to ``path`` and return the path."""
    out = check_plot_path(path)
    figure = Figure(figsize=(13, 6.5), layout="constrained")
    FigureCanvasAgg(figure)
    device_ax, story_ax = figure.subplots(1, 2, width_ratios=(1, 3.4))
    figure.suptitle(_headline(result), fontsize=12, fontweight="bold")

    capacity = result.device.total_memory / GiB
    sizing = result.sizing
    floor = 0.0 if sizing is None else (sizing.weights_bytes + sizing.kv_cache_bytes) / GiB
    lines = [
        _Line(capacity, f"capacity {format_size(result.device.total_memory)}", "black", "-"),
        _Line(
            capacity - result.non_torch_bytes / GiB,
            f"capacity - non-torch ({format_size(result.non_torch_bytes)})",
            "dimgray",
            ":",
        ),
        _Line(
            capacity * result.gpu_memory_utilization,
            f"gpu_memory_utilization {result.gpu_memory_utilization:g}",
            "dimgray",
            "--",
        ),
    ]
    if sizing is not None:
        lines.append(_Line(floor, "weights + KV cache", KV_COLOR, "-"))

    if result.oom is not None and result.focus is None:  # failed before any serving step
        _draw_device_at_failure(device_ax, result, capacity)
        _draw_failure_text(story_ax, result)
    else:
        low, high = _draw_story(story_ax, result, floor, capacity)
        _draw_lines(story_ax, lines, low, high)
        _draw_device(device_ax, result, floor, capacity, low, high)
    figure.savefig(out, dpi=110, bbox_inches="tight", pad_inches=0.15)
    return out


def _headline(result: SimulationResult) -> str:
    title = f"{result.model} on {result.device.name}, workload {result.workload}"
    if result.regression:
        title += f", regression {result.regression}"
    if result.oom is not None:
        where = "while sizing" if result.oom_step is None else f"at step {result.oom_step}"
        return f"{title}: OUT OF MEMORY {where}"
    return f"{title}: every allocation fit ({len(result.steps)} steps)"


def _draw_device_at_failure(ax: Axes, result: SimulationResult, capacity: float) -> None:
    """The device when an allocation did not fit before serving began (while sizing)."""
    oom = result.oom
    assert oom is not None
    live = oom.allocated_bytes / GiB
    non_torch = result.non_torch_bytes / GiB
    segments = [
        (0.0, live, WEIGHTS_COLOR, f"live at the error\n{format_size(oom.allocated_bytes)}"),
        (
            capacity - non_torch,
            capacity,
            NON_TORCH_COLOR,
            f"non-torch\n{format_size(result.non_torch_bytes)}",
        ),
    ]
    _draw_bar(ax, segments, capacity)
    ax.add_patch(
        Rectangle(
            (0.15, live),
            0.7,
            oom.nbytes / GiB,
            facecolor=OOM_COLOR,
            hatch="//",
            edgecolor="white",
            zorder=3,
        )
    )
    ax.annotate(
        f"{format_size(oom.nbytes)}\ndoes not fit",
        xy=(0.85, live + oom.nbytes / GiB),
        xytext=(1.05, live + oom.nbytes / GiB),
        va="center",
        ha="left",
        fontsize=8,
        color=OOM_COLOR,
        arrowprops={"arrowstyle": "-", "color": OOM_COLOR, "lw": 0.6},
    )
    _device_axes(ax, result, capacity)


def _draw_failure_text(ax: Axes, result: SimulationResult) -> None:
    """Out of memory before any serving step: say what failed, no zoomed panel."""
    oom = result.oom
    assert oom is not None
    where = f"at {oom.source}" if oom.source is not None else "(no Python source line)"
    lines = [
        "Out of memory before serving began, while sizing the KV cache (vLLM's start-up):",
        f"{oom.op} tried to allocate {format_size(oom.requested_bytes)} {where};",
        f"{format_size(oom.free_bytes)} free of {format_size(oom.capacity_bytes)}, "
        f"{format_size(result.non_torch_bytes)} outside torch.",
        "",
        "Live at the error, by source line:",
        *(f"  {site.describe().strip()}" for site in result.top_sites[:6]),
    ]
    ax.axis("off")
    ax.text(
        0.0,
        1.0,
        "\n".join(lines),
        transform=ax.transAxes,
        va="top",
        ha="left",
        fontsize=9.5,
        family="monospace",
        color="black",
    )


def _draw_bar(ax: Axes, segments: list[tuple[float, float, str, str]], capacity: float) -> None:
    for bottom, top, color, label in segments:
        ax.add_patch(Rectangle((0, bottom), 1, top - bottom, facecolor=color, edgecolor="white"))
        if (top - bottom) / capacity > 0.07:  # room for the label inside
            ax.text(
                0.5,
                (bottom + top) / 2,
                label,
                ha="center",
                va="center",
                fontsize=8.5,
                color="white" if color in (WEIGHTS_COLOR, KV_COLOR) else "black",
            )
    ax.add_patch(Rectangle((0, 0), 1, capacity, fill=False, edgecolor="black", lw=1))


def _device_axes(ax: Axes, result: SimulationResult, capacity: float) -> None:
    ax.set_xlim(-0.3, 1.3)
    ax.set_ylim(0, capacity * 1.02)
    ax.set_xticks([])
    ax.set_ylabel("device memory (GiB)")
    ax.set_title(f"{result.device.name}: {format_size(result.device.total_memory)}", fontsize=10)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)


def _draw_device(
    ax: Axes, result: SimulationResult, floor: float, capacity: float, low: float, high: float
) -> None:
    sizing = result.sizing
    non_torch = result.non_torch_bytes / GiB
    segments: list[tuple[float, float, str, str]] = []
    if sizing is not None:
        weights = sizing.weights_bytes / GiB
        segments += [
            (0, weights, WEIGHTS_COLOR, f"weights + buffers\n{format_size(sizing.weights_bytes)}"),
            (
                weights,
                floor,
                KV_COLOR,
                f"KV cache\n{format_size(sizing.kv_cache_bytes)}\n{sizing.num_blocks:,} blocks",
            ),
        ]
    segments += [
        (floor, capacity - non_torch, HEADROOM_COLOR, "left for\nserving steps"),
        (capacity - non_torch, capacity, NON_TORCH_COLOR, "non-torch"),
    ]
    _draw_bar(ax, segments, capacity)
    if high > low:
        top = min(high, capacity)
        ax.add_patch(
            Rectangle(
                (-0.06, low),
                1.12,
                top - low,
                fill=False,
                edgecolor="black",
                lw=1.2,
                ls="--",
                zorder=3,
            )
        )
        ax.annotate(
            "zoomed\nat right",
            xy=(1.06, (low + top) / 2),
            xytext=(1.1, (low + top) / 2),
            va="center",
            ha="left",
            fontsize=8,
        )
    _device_axes(ax, result, capacity)


def _draw_story(
    ax: Axes, result: SimulationResult, floor: float, capacity: float
) -> tuple[float, float]:
    """Draw the zoomed panel; returns its y range (GiB)."""
    span = max(capacity - floor, capacity * 0.02)
    low = max(floor - 0.08 * span, 0.0)
    focus = result.focus
    if result.oom is not None and focus is not None:
        top = _draw_failing_step(ax, result, focus, span)
    else:
        top = _draw_steps(ax, result)
    high = max(capacity, top) + 0.1 * span
    ax.set_ylim(low, high)
    ax.set_ylabel("live torch memory (GiB)")
    ax.grid(axis="y", alpha=0.3)
    return low, high


def _draw_steps(ax: Axes, result: SimulationResult) -> float:
    steps = [s.step for s in result.steps]
    peaks = [s.peak_bytes / GiB for s in result.steps]
    ax.plot(steps, peaks, color="#DD8452", lw=1.2, label="peak within the step")
    ax.plot(
        steps,
        [s.end_bytes / GiB for s in result.steps],
        color="#4C72B0",
        lw=0.9,
        label="live after the step",
    )
    _draw_headroom(ax, result, steps, peaks)
    if steps:
        best = max(result.steps, key=lambda s: s.peak_bytes)
        ax.scatter([best.step], [best.peak_bytes / GiB], color="#DD8452", zorder=3, s=25)
        headroom = result.device.total_memory - result.non_torch_bytes - best.peak_bytes
        ax.set_title(
            f"serving steps, zoomed: the highest peak is step {best.step}, "
            f"{format_size(best.peak_bytes)} ({format_size(headroom)} below capacity - non-torch)",
            fontsize=10,
        )
        ax.set_xlim(min(steps) - 0.5, max(steps) + 0.5)
    ax.set_xlabel("serving step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="upper left", bbox_to_anchor=(0, -0.1), ncol=2, fontsize=8, frameon=False)
    return max(peaks, default=0.0)


def _draw_failing_step(ax: Axes, result: SimulationResult, focus: StepEvents, span: float) -> float:
    oom = result.oom
    assert oom is not None
    xs = [0]
    ys = [focus.start_bytes / GiB]
    big: dict[tuple[str, str | None], list[tuple[int, float, float]]] = {}
    first: dict[tuple[str, str | None], Allocation] = {}
    for i, event in enumerate(focus.events, start=1):
        before, after = ys[-1], event.live_bytes / GiB
        xs.append(i)
        ys.append(after)
        allocation = event.allocation
        if allocation is not None and after - before >= BIG_SHARE * span:
            big.setdefault(allocation.site, []).append((i, before, after))
            first.setdefault(allocation.site, allocation)
    width = max(len(xs) * 0.012, 0.8)
    ax.step(xs, ys, where="post", color="black", lw=0.8, label="live bytes, event by event")
    for n, (site, bars) in enumerate(sorted(big.items(), key=lambda kv: -len(kv[1]))):
        allocation = first[site]
        where = f" at {allocation.source}" if allocation.source is not None else ""
        size = max(after - before for _, before, after in bars)
        label = f"{len(bars)} x {allocation.op}{where} (up to {size:.2f} GiB)"
        color = SITE_COLORS[n % len(SITE_COLORS)]
        for k, (x, before, after) in enumerate(bars):
            ax.bar(
                x,
                after - before,
                bottom=before,
                width=width,
                align="edge",
                color=color,
                edgecolor="white",
                lw=0.5,
                label=label if k == 0 else None,
            )
    _draw_headroom(ax, result, xs, ys)
    live = oom.allocated_bytes / GiB
    wanted = live + oom.nbytes / GiB
    x_fail = len(xs)
    ax.bar(
        x_fail,
        wanted - live,
        bottom=live,
        width=width,
        align="edge",
        color=OOM_COLOR,
        hatch="//",
        edgecolor="white",
        lw=0.5,
        label=f"{oom.op} that does not fit",
    )
    capacity = result.device.total_memory / GiB
    ax.annotate(
        f"{format_size(oom.nbytes)}: does not fit",
        xy=(x_fail + width, max(wanted, capacity)),
        xytext=(0, 5),
        textcoords="offset points",
        ha="right",
        va="bottom",
        fontsize=9,
        color=OOM_COLOR,
        fontweight="bold",
    )
    ax.set_xlim(-0.5, x_fail + width + max(len(xs) * 0.02, 0.5))
    ax.set_xlabel(f"allocation and free events of step {focus.step}")
    where = f" at {oom.source}" if oom.source is not None else ""
    ax.set_title(
        f"step {focus.step}, event by event: tried to allocate {format_size(oom.requested_bytes)} "
        f"with {format_size(oom.free_bytes)} free\n{oom.op}{where}",
        fontsize=10,
        color=OOM_COLOR,
    )
    ax.legend(loc="upper left", bbox_to_anchor=(0, -0.1), ncol=1, fontsize=8, frameon=False)
    return wanted


def _draw_headroom(ax: Axes, result: SimulationResult, xs: list[int], ys: list[float]) -> None:
    """Mark what profiling left unmeasured: from the budget line up to capacity less non-torch."""
    capacity = result.device.total_memory / GiB
    budget = capacity * result.gpu_memory_utilization
    usable = capacity - result.non_torch_bytes / GiB
    if not xs or usable <= budget:
        return
    start, end = xs[0], xs[-1]
    if any(y > budget for x, y in zip(xs, ys, strict=True) if x <= start + (end - start) * 0.45):
        return  # no room on the left: the line is already high there
    x = start + (end - start) * 0.02
    ax.annotate(
        "",
        xy=(x, usable),
        xytext=(x, budget),
        arrowprops={"arrowstyle": "<->", "color": "dimgray", "lw": 0.9},
    )
    ax.text(
        x + max((end - start) * 0.01, 0.1),
        (budget + usable) / 2,
        f"headroom vLLM leaves for what\nprofile_run does not measure:\n"
        f"{format_size(int((usable - budget) * GiB))}",
        va="center",
        ha="left",
        fontsize=8.5,
        color="dimgray",
    )


def _draw_lines(ax: Axes, lines: list[_Line], low: float, high: float) -> None:
    """Horizontal lines across the panel, labelled in the right margin without overlaps."""
    height_points = ax.get_window_extent().height * 72 / ax.figure.dpi
    gap = LABEL_GAP_POINTS / max(height_points, 1.0)
    visible = sorted((line for line in lines if low <= line.y <= high), key=lambda ln: ln.y)
    placed: list[float] = []
    for line in visible:
        ax.axhline(line.y, color=line.color, ls=line.style, lw=1.1, zorder=1)
        fraction = (line.y - low) / (high - low)
        placed.append(max(fraction, placed[-1] + gap) if placed else fraction)
    overflow = (placed[-1] - 1.0) if placed else 0.0
    if overflow > 0:  # pushed past the top: shift the stack down
        placed = [p - overflow for p in placed]
    for line, fraction in zip(visible, placed, strict=True):
        true = (line.y - low) / (high - low)
        ax.annotate(
            line.label,
            xy=(1.0, true),
            xycoords="axes fraction",
            xytext=(1.02, fraction),
            textcoords="axes fraction",
            va="center",
            ha="left",
            fontsize=8,
            color=line.color if line.color != KV_COLOR else "#2F6B3A",
            arrowprops={"arrowstyle": "-", "color": line.color, "lw": 0.6},
            annotation_clip=False,
        )
