# pyright: reportUnknownMemberType=false
# (matplotlib annotates **kwargs without types)
"""Draw a simulation: live bytes per step against the device's capacity, the KV cache and the OOM.

Uses matplotlib's Agg canvas directly (no global backend switch, no display needed).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from harness.errors import HarnessError
from harness.memory.sizes import GiB, format_size

if TYPE_CHECKING:
    from harness.memory.simulate import SimulationResult


def check_plot_path(path: str | Path) -> Path:
    """``path`` as a ``Path`` if a PNG can be written there; otherwise a :class:`HarnessError`.

    Nothing is left behind: a file that did not exist is created to prove it can be, then removed;
    an existing file is opened for appending and not written.
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


def plot_simulation(result: SimulationResult, path: str | Path) -> Path:
    """Write a PNG of ``result`` to ``path`` and return the path."""
    out = check_plot_path(path)

    figure = Figure(figsize=(10, 5.5), layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    capacity = result.device.total_memory
    steps = [s.step for s in result.steps]
    ax.plot(steps, [s.peak_bytes / GiB for s in result.steps], label="peak within step", lw=1.2)
    ax.plot(steps, [s.end_bytes / GiB for s in result.steps], label="live after step", lw=0.8)
    ax.axhline(capacity / GiB, color="black", lw=1.2, label=f"capacity {format_size(capacity)}")
    usable = capacity - result.non_torch_bytes
    ax.axhline(usable / GiB, color="gray", ls=":", lw=1, label="capacity - non-torch memory")
    budget = capacity * result.gpu_memory_utilization
    ax.axhline(
        budget / GiB,
        color="gray",
        ls="--",
        lw=1,
        label=f"gpu_memory_utilization {result.gpu_memory_utilization:g}",
    )
    sizing = result.sizing
    if sizing is not None:
        base = sizing.weights_bytes / GiB
        top = (sizing.weights_bytes + sizing.kv_cache_bytes) / GiB
        ax.axhspan(base, top, color="tab:green", alpha=0.15, label="KV cache")
        ax.axhspan(0, base, color="tab:blue", alpha=0.08, label="weights + buffers")
        ax.scatter(
            [-1],
            [sizing.profile_torch_peak_bytes / GiB],
            marker="D",
            color="tab:purple",
            zorder=3,
            label=f"profile_run peak ({sizing.num_blocks} blocks)",
        )
    oom = result.oom
    if oom is not None:
        x = -1 if result.oom_step is None else result.oom_step
        live = oom.allocated_bytes / GiB
        wanted = live + oom.requested_bytes / GiB
        ax.vlines([x], live, wanted, colors="tab:red", lw=3, zorder=3)
        ax.scatter([x], [wanted], marker="X", s=90, color="tab:red", zorder=4, label="OOM")
        where = f"\nat {oom.source}" if oom.source is not None else ""
        ax.annotate(
            f"OOM: tried to allocate {format_size(oom.requested_bytes)} "
            f"({format_size(oom.free_bytes)} free)\n{oom.op}{where}",
            xy=(x, wanted),
            xytext=(-12, -60),
            textcoords="offset points",
            ha="right",
            fontsize=8,
            color="tab:red",
        )
        ax.set_xlim(-1.5, max(x, len(result.steps)) + 0.5)
    title = f"{result.model} on {result.device.name}, {result.workload}"
    if result.regression:
        title += f", regression {result.regression}"
    ax.set_title(title)
    ax.set_xlabel("serving step (-1: profile_run)")
    ax.set_ylabel("live torch memory (GiB)")
    ax.set_ylim(0, capacity / GiB * 1.05)
    ax.legend(loc="lower right", fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    figure.savefig(out, dpi=110)
    return out
