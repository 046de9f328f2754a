"""Scaling detector: which allocations grow with ``num_blocks``?

vLLM sizes ``num_blocks`` to fill what profiling left, so a per-step allocation that grows with it
is an out-of-memory error waiting for a larger GPU; only the KV cache may scale.
:func:`detect_scaling` runs a workload at two block counts (both without preemption, checked),
pairs the allocations region by region and reports each pair whose size differs. Defaults
(``meta``, bfloat16 KV cache) catch what CPU or float32 would hide (``docs/simulation.md``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from harness.errors import HarnessError
from harness.memory.allocation import Allocation
from harness.memory.ledger import Ledger
from harness.memory.sizes import GiB, format_size
from harness.reference.backends.abstract import AttentionBackend
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.reference.config import VllmConfig
from harness.reference.engine import memory_tracker, start_engine, tracking
from harness.reference.kv_cache_utils import InsufficientKVCacheMemoryError
from harness.reference.model import weight_bytes
from harness.reference.runner import ModelRunner
from harness.simulation.simulate import add_workload
from harness.simulation.workload import Workload, engine_config

KV_CACHE_REGION = "initialize_kv_cache"
MAX_NUM_BLOCKS = 1 << 20
"""The scheduler keeps a Python list per block; what scales does so at any count."""
MAX_CPU_BYTES = 2 * GiB
"""Weights plus a KV cache above this do not run on the CPU (``meta`` holds no data)."""


@dataclass(frozen=True, slots=True)
class ScalingAllocation:
    """An allocation site whose size differs between the two ``num_blocks`` runs."""

    region: str
    op: str
    source: str | None
    line_text: str
    nbytes: tuple[int, int]
    shape: tuple[tuple[int, ...], tuple[int, ...]]
    bytes_per_block: float
    """``(nbytes[1] - nbytes[0]) / (num_blocks[1] - num_blocks[0])``."""
    count: int = 1
    """How many allocations of this site (op + source) scaled; the first one is described."""

    def describe(self) -> str:
        where = self.source or "<no Python frame>"
        shapes = " -> ".join("x".join(map(str, s)) or "scalar" for s in self.shape)
        times = f" (x{self.count})" if self.count > 1 else ""
        line = f"\n      {self.line_text}" if self.line_text else ""
        return (
            f"{self.bytes_per_block:g} bytes/block  {self.op} [{shapes}] in {self.region}{times}\n"
            f"    at {where}{line}"
        )


@dataclass
class ScalingReport:
    """The allocations that scale with ``num_blocks``: the KV cache (allowed) and the rest."""

    model: str
    regression: str | None
    """The name of the backend variant that ran (``None``: the reference backend)."""
    device: str
    dtype: str
    """The dtype of the weights and the KV cache in both runs."""
    num_blocks: tuple[int, int]
    num_steps: int
    kv_cache: list[ScalingAllocation] = field(default_factory=list[ScalingAllocation])
    """The per-layer KV cache tensors: allowed to scale."""
    findings: list[ScalingAllocation] = field(default_factory=list[ScalingAllocation])
    """Everything else that scales: each one is a bug."""

    @property
    def ok(self) -> bool:
        return not self.findings

    def format(self) -> str:
        a, b = self.num_blocks
        head = (
            f"scaling: {self.model} ({self.dtype}) on {self.device}"
            + (f" with regression {self.regression}" if self.regression else "")
            + f", {self.num_steps} steps at num_blocks={a} and {b}"
        )
        kv = sum(x.count for x in self.kv_cache)
        lines = [head, f"  allowed: {kv} KV cache tensor(s) scale with num_blocks"]
        if self.ok:
            lines.append("  OK: nothing else scales with num_blocks")
        else:
            lines.append(
                f"  FAIL: {len(self.findings)} allocation site(s) scale with num_blocks "
                "(only the KV cache may):"
            )
            lines.extend("  " + f.describe().replace("\n", "\n  ") for f in self.findings)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


@dataclass
class _Run:
    allocations: dict[str, list[Allocation]]
    """Region -> its allocations in order."""
    schedule: list[tuple[int, tuple[tuple[str, int], ...]]]
    """Per step: total tokens and (request id, tokens) pairs, to check both runs agree."""
    page_size_bytes: int


def _run(
    vllm_config: VllmConfig,
    backend: type[AttentionBackend],
    workload: Workload,
    num_blocks: int,
    device: str,
    max_steps: int | None,
) -> _Run:
    ledger = Ledger()
    allocations: dict[str, list[Allocation]] = {}
    schedule: list[tuple[int, tuple[tuple[str, int], ...]]] = []
    with tracking(memory_tracker(ledger, device)):
        try:
            engine = start_engine(
                vllm_config,
                backend,
                num_blocks,
                device=device,
                kv_cache_region=_recorded(ledger, KV_CACHE_REGION, allocations),
                wrap_step=lambda step: _recorded(ledger, f"step {step}", allocations),
            )
        except InsufficientKVCacheMemoryError as exc:
            raise HarnessError(f"num_blocks={num_blocks} is too small: {exc}") from None
        add_workload(engine, workload, vllm_config.model_config.name)
        engine.run(
            lambda step: schedule.append(
                (
                    step.scheduler_output.total_num_scheduled_tokens,
                    tuple(sorted(step.scheduler_output.num_scheduled_tokens.items())),
                )
            ),
            max_steps=max_steps,
        )
        if engine.scheduler.num_preemptions:
            raise HarnessError(
                f"num_blocks={num_blocks} is too small for the workload "
                f"({engine.scheduler.num_preemptions} preemptions): the two runs would not "
                "schedule alike; use more blocks"
            )
    spec = engine.runner.get_kv_cache_spec()
    page_size = max(s.page_size_bytes for s in spec.values())
    return _Run(allocations=allocations, schedule=schedule, page_size_bytes=page_size)


@contextlib.contextmanager
def _recorded(
    ledger: Ledger, region: str, into: dict[str, list[Allocation]]
) -> Generator[None, None, None]:
    """Name the block's events ``region`` and keep its allocations, in order, in ``into``."""
    with ledger.region(region), ledger.recording() as recording:
        yield
    into[region] = [e.allocation for e in recording.events if e.allocation is not None]


def scaling_pairs(
    a: dict[str, list[Allocation]], b: dict[str, list[Allocation]]
) -> Iterator[tuple[str, Allocation, Allocation | None]]:
    """Pairs of two runs' allocations (region -> allocations in order) whose sizes differ, or
    that exist in one run only, region by region."""
    for region in sorted(set(a) | set(b)):
        left = a.get(region, [])
        right = b.get(region, [])
        if [x.site for x in left] == [y.site for y in right]:
            for x, y in zip(left, right, strict=True):
                if x.nbytes != y.nbytes:
                    yield region, x, y
            continue
        # Different allocation sequences: pair by site occurrence, unmatched ones are findings.
        counts: dict[tuple[str, str | None], list[Allocation]] = {}
        for y in right:
            counts.setdefault(y.site, []).append(y)
        for x in left:
            candidates = counts.get(x.site)
            match = candidates.pop(0) if candidates else None
            if match is None or x.nbytes != match.nbytes:
                yield region, x, match
        for leftovers in counts.values():
            for extra in leftovers:
                yield region, extra, None


def detect_scaling(
    *,
    model: str,
    workload: Workload,
    backend: type[AttentionBackend] | None = None,
    regression: str | None = None,
    num_blocks: tuple[int, int] = (64, 128),
    device: str = "meta",
    dtype: torch.dtype = torch.bfloat16,
    max_steps: int | None = None,
) -> ScalingReport:
    """Run ``workload`` at two ``num_blocks`` and report what scales (module docstring); ``backend``
    defaults to the reference FlashInfer, ``regression`` labels it (default: the class's name).
    """
    a_blocks, b_blocks = num_blocks
    if a_blocks <= 0 or b_blocks <= 0 or a_blocks == b_blocks:
        raise HarnessError(f"num_blocks must be two different positive counts, got {num_blocks}")
    if max(num_blocks) > MAX_NUM_BLOCKS:
        raise HarnessError(
            f"num_blocks must be at most {MAX_NUM_BLOCKS:,}, got {max(num_blocks):,} (what "
            "scales with num_blocks does so at any count)"
        )
    if device not in ("cpu", "meta"):
        raise HarnessError(f"device must be 'cpu' or 'meta', got {device!r}")
    if backend is not None and regression is None:
        regression = backend.__qualname__
    vllm_config = engine_config(model, workload, dtype=dtype)
    if device == "cpu":
        _check_fits_on_the_cpu(vllm_config, max(num_blocks))
    run_a = _run(vllm_config, backend or FlashInferBackend, workload, a_blocks, device, max_steps)
    run_b = _run(vllm_config, backend or FlashInferBackend, workload, b_blocks, device, max_steps)
    if run_a.schedule != run_b.schedule:
        raise HarnessError("the two runs scheduled differently; cannot compare their allocations")
    report = ScalingReport(
        model=model,
        regression=regression,
        device=device,
        dtype=str(dtype).removeprefix("torch."),
        num_blocks=num_blocks,
        num_steps=len(run_a.schedule),
    )
    sites: dict[tuple[str, str, str | None], ScalingAllocation] = {}
    for region, x, y in scaling_pairs(run_a.allocations, run_b.allocations):
        y_bytes = 0 if y is None else y.nbytes
        per_block = (y_bytes - x.nbytes) / (b_blocks - a_blocks)
        is_kv_cache = (
            region == KV_CACHE_REGION
            and y is not None
            and x.nbytes == a_blocks * run_a.page_size_bytes
            and y.nbytes == b_blocks * run_b.page_size_bytes
        )
        key = (region if is_kv_cache else "", *x.site)
        if key in sites:
            sites[key] = replace(sites[key], count=sites[key].count + 1)
            continue
        sites[key] = ScalingAllocation(
            region=region,
            op=x.op,
            source=x.site[1],
            line_text="" if x.source is None else x.source.text,
            nbytes=(x.nbytes, y_bytes),
            shape=(tuple(x.shape), () if y is None else tuple(y.shape)),
            bytes_per_block=per_block,
        )
    report.kv_cache = [sites[k] for k in sites if k[0] == KV_CACHE_REGION]
    report.findings = [sites[k] for k in sites if k[0] != KV_CACHE_REGION]
    return report


def _check_fits_on_the_cpu(vllm_config: VllmConfig, num_blocks: int) -> None:
    """Real weights and a real KV cache of ``num_blocks`` must fit in :data:`MAX_CPU_BYTES`."""
    shapes_only = ModelRunner(vllm_config, "meta", FlashInferBackend)
    spec = shapes_only.get_kv_cache_spec()
    kv_cache = sum(num_blocks * s.page_size_bytes for s in spec.values())
    needed = weight_bytes(shapes_only.get_model()) + kv_cache
    if needed > MAX_CPU_BYTES:
        raise HarnessError(
            f"{vllm_config.model_config.name} with num_blocks={num_blocks:,} needs "
            f"{format_size(needed)} of real weights and KV cache on the CPU (at most "
            f"{format_size(MAX_CPU_BYTES)}); use --device meta (what scales with num_blocks does "
            "so at every size)"
        )
