"""The scaling detector on a vLLM tree's own builders.

For each backend, two child processes (:func:`~harness.adapter.jobs.run_job_in_child`) drive
the builder over the same serving sequence, under the memory tracker (every thread), with
``num_gpu_blocks`` at the sequence's pool of blocks and at twice that (``cache_config.num_gpu_blocks`` and the KV cache
tensors change; the schedule, block ids included, does not). Allocations are paired region by
region (:func:`harness.simulation.scaling.scaling_pairs`); any pair whose size differs, except
the KV cache itself, is a finding: the tree's ``file:line``, the op, bytes per block, and whether
it happens once (building the layers or the builder) or on every step it ran.

Not covered: the attention impl's ``forward`` and every kernel (stubbed); allocations a kernel
would make itself; CUDA graph capture (the adapter runs eagerly).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from harness.adapter.jobs import job, run_job_in_child
from harness.adapter.platform import PlatformOptions
from harness.errors import ChildError, HarnessError
from harness.memory.allocation import Allocation, SourceLine
from harness.simulation.scaling import scaling_pairs
from harness.vllm_tree.tree import VllmTree

KV_CACHE_REGION = "initialize_kv_cache"
ONCE_REGIONS = ("layers", "construct")
NOT_COVERED = (
    "not covered: the impl's forward and every kernel (stubbed), allocations inside kernels, "
    "CUDA graph capture (runs eagerly)"
)


@dataclass(frozen=True, slots=True)
class TreeScalingFinding:
    """One allocation site of the tree whose size grows with ``num_blocks``."""

    source: str
    """``path:line`` in the vLLM tree (or ``<no Python frame>``)."""
    line_text: str
    op: str
    bytes_per_block: float
    when: str
    """``once (building the builder)``, ``once (building the layers)``, ``on every step (N)``
    or ``on K of N steps``."""

    def describe(self) -> str:
        return (
            f"{self.source}: {self.op} grows {self.bytes_per_block:g} bytes/block, {self.when}"
            + (f"\n      {self.line_text}" if self.line_text else "")
        )


@dataclass
class BackendScaling:
    """One backend's verdict."""

    backend: str
    num_blocks: tuple[int, int] = (0, 0)
    steps: int = 0
    findings: list[TreeScalingFinding] = field(default_factory=list[TreeScalingFinding])
    kv_cache_tensors: int = 0
    stopped: str | None = None
    """Why the backend could not be driven (or where its run stopped), if it could not."""
    error: str | None = None
    """The tree's code ended the run (``sys.exit``, ``os._exit``, a crash, a thread's
    exception, past the time limit): this backend's check failed, whatever else it says."""
    notes: list[str] = field(default_factory=list[str])

    @property
    def ok(self) -> bool:
        return not self.findings and self.error is None

    @property
    def complete(self) -> bool:
        """Driven through the whole sequence (no exception stopped it)."""
        return self.steps > 0 and self.stopped is None

    def format(self) -> str:
        head = f"{self.backend}: "
        if self.error is not None:
            return head + f"ERROR: {self.error}"
        if self.stopped and not self.steps:
            return head + f"not run: {self.stopped}"
        a, b = self.num_blocks
        head += f"{self.steps} steps at num_blocks={a} and {b}, {self.kv_cache_tensors} KV cache tensor(s) allowed"
        lines = [head]
        if self.stopped:
            lines.append(f"  the run stopped: {self.stopped}")
        if self.findings:
            lines.append(f"  FAIL: {len(self.findings)} allocation site(s) grow with num_blocks:")
            lines.extend("    " + f.describe() for f in self.findings)
        elif self.stopped:
            lines.append(
                f"  NOT COVERED past step {self.steps - 1}; nothing but the KV cache grew before"
            )
        else:
            lines.append("  OK: nothing but the KV cache grows with num_blocks")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def _allocations(regions: dict[str, list[dict[str, Any]]]) -> dict[str, list[Allocation]]:
    out: dict[str, list[Allocation]] = {}
    for label, items in regions.items():
        allocations: list[Allocation] = []
        for item in items:
            source = None
            if item["source"]:
                path, _, line = item["source"].rpartition(":")
                source = SourceLine(path, int(line))
            allocations.append(
                Allocation(
                    op=item["op"],
                    nbytes=item["nbytes"],
                    shape=tuple(item["shape"]),
                    dtype=torch.uint8,
                    device="cpu",
                    source=source,
                    region=label,
                )
            )
        out[label] = allocations
    return out


def compare_traces(backend: str, a: dict[str, Any], b: dict[str, Any]) -> BackendScaling:
    """The verdict from two ``trace`` job results (``a`` at fewer blocks)."""
    blocks = (int(a["num_gpu_blocks"]), int(b["num_gpu_blocks"]))
    result = BackendScaling(backend, blocks, int(a["run"]["steps_run"]))
    result.notes = list(a["run"]["notes"])
    if a["run"]["error"]:
        error = a["run"]["error"]
        result.stopped = f"step {a['run']['error_step']}: {error['type']}: {error['message']} at {error['where']}"
        if error["type"] == "SystemExit":  # the engine would have ended there
            result.error = f"the tree's code called sys.exit() in {result.stopped}"
    texts = {
        item["source"]: item["line_text"]
        for items in a["regions"].values()
        for item in items
        if item["source"]
    }
    per_site: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for region, x, y in scaling_pairs(_allocations(a["regions"]), _allocations(b["regions"])):
        per_block = ((0 if y is None else y.nbytes) - x.nbytes) / (blocks[1] - blocks[0])
        if region == KV_CACHE_REGION:
            result.kv_cache_tensors += 1
            continue
        where = "<no Python frame>" if x.source is None else f"{x.source.path}:{x.source.line}"
        per_site.setdefault((where, x.op), []).append((region, per_block))
    num_steps = result.steps
    for (where, op), hits in per_site.items():
        regions = {r for r, _ in hits}
        step_regions = {r for r in regions if r.startswith("step ")}
        if step_regions:
            when = (
                f"on every step ({num_steps})"
                if len(step_regions) == num_steps
                else f"on {len(step_regions)} of {num_steps} steps"
            )
        else:
            when = "once (building the " + ("layers)" if "layers" in regions else "builder)")
        result.findings.append(
            TreeScalingFinding(
                source=where,
                line_text=texts.get(where, ""),
                op=op,
                bytes_per_block=max(abs(p) for _, p in hits),
                when=when,
            )
        )
    return result


def tree_scaling(
    tree: VllmTree, backend: str, options: PlatformOptions, steps: int, seed: int = 0
) -> BackendScaling:
    """The scaling detector on one backend of ``tree`` (module docstring)."""
    traces: list[dict[str, Any]] = []
    for factor in (1, 2):
        work = job(
            "trace", tree, options, backend=backend, steps=steps, seed=seed, blocks_factor=factor
        )
        try:
            traces.append(run_job_in_child(work, f"{backend} at {factor}x num_blocks"))
        except HarnessError as exc:
            return BackendScaling(backend, stopped=str(exc))
        except ChildError as exc:
            return BackendScaling(backend, error=str(exc))
    return compare_traces(backend, traces[0], traces[1])
