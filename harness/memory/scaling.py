"""Scaling detector: which allocations grow with ``num_blocks``?

vLLM sizes ``num_blocks`` to fill whatever the profiling run left, so any allocation made after
profiling whose size grows with ``num_blocks`` is an out-of-memory error waiting for a larger GPU
(the FlashInfer gsm8k OOM was one). The KV cache itself is the only allocation allowed to scale.

``detect_scaling(model="tiny", regression=...)`` runs the same workload twice, with the KV cache
given exactly ``num_blocks[0]`` and then ``num_blocks[1]`` blocks, records every allocation of
each run (op, size, shape, source line, region: ``initialize_kv_cache`` or ``step N``), pairs the
two runs allocation by allocation within each region (same op and source line in the same order)
and reports every pair whose size differs, with its bytes per block. Both block counts must hold
the whole workload without preemption, so the two runs schedule identically; the detector checks
that they did.

It runs on the CPU with real data (or on ``meta``), so a tiny model is enough: what scales with
``num_blocks`` does so at every model size.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from harness.errors import HarnessError
from harness.memory.tracker import Allocation, MemoryTracker, SourceLine
from harness.memory.workload import Workload
from harness.reference.backends.abstract import AttentionBackend
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.reference.config import CacheConfig, SchedulerConfig, VllmConfig, get_model_config
from harness.reference.kv_cache_utils import InsufficientKVCacheMemoryError, get_kv_cache_config
from harness.reference.runner import ModelRunner
from harness.reference.scheduler import Request, Scheduler
from harness.regressions import get_regression

KV_CACHE_REGION = "initialize_kv_cache"
MAX_CPU_WEIGHT_BYTES = 1 << 30
"""Larger models run the detector on ``meta``."""
DEFAULT_NUM_BLOCKS = (64, 128)


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "op": self.op,
            "source": self.source,
            "line_text": self.line_text,
            "nbytes": list(self.nbytes),
            "shape": [list(s) for s in self.shape],
            "bytes_per_block": self.bytes_per_block,
            "count": self.count,
        }


@dataclass
class ScalingReport:
    """The allocations that scale with ``num_blocks``: the KV cache (allowed) and the rest."""

    model: str
    regression: str | None
    device: str
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
            f"scaling: {self.model} on {self.device}"
            + (f" with regression {self.regression}" if self.regression else "")
            + f", {self.num_steps} steps at num_blocks={a} and {b}"
        )
        lines = [head]
        kv = sum(x.count for x in self.kv_cache)
        lines.append(f"  allowed: {kv} KV cache tensor(s) scale with num_blocks")
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
        return {
            "model": self.model,
            "regression": self.regression,
            "device": self.device,
            "num_blocks": list(self.num_blocks),
            "num_steps": self.num_steps,
            "ok": self.ok,
            "kv_cache": [x.to_dict() for x in self.kv_cache],
            "findings": [x.to_dict() for x in self.findings],
        }


@dataclass
class _Run:
    allocations: dict[str, list[Allocation]]
    """Region -> its allocations in order."""
    schedule: list[tuple[int, tuple[tuple[str, int], ...]]]
    """Per step: total tokens and (request id, tokens) pairs, to check both runs agree."""
    page_size_bytes: int


def _weight_bytes(vllm_config: VllmConfig) -> int:
    c = vllm_config.model_config
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    per_layer = (
        c.hidden_size * (q + 2 * kv) + q * c.hidden_size + 3 * c.hidden_size * c.intermediate_size
    )
    params = 2 * c.vocab_size * c.hidden_size + c.num_hidden_layers * per_layer
    return params * torch.empty((), dtype=c.dtype, device="meta").element_size()


def _vllm_config(model: str, workload: Workload) -> VllmConfig:
    model_config = get_model_config(model)
    limits = workload.limits
    max_model_len = min(limits.max_model_len, model_config.max_model_len)
    return VllmConfig(
        model_config=replace(model_config, max_model_len=max_model_len),
        cache_config=CacheConfig(),
        scheduler_config=SchedulerConfig(
            max_num_seqs=limits.max_num_seqs,
            max_num_batched_tokens=limits.max_num_batched_tokens,
            max_model_len=max_model_len,
        ),
    )


def _run(
    vllm_config: VllmConfig,
    backend: type[AttentionBackend],
    workload: Workload,
    num_blocks: int,
    device: str,
    max_steps: int | None,
) -> _Run:
    runner = ModelRunner(vllm_config, device, backend)
    spec = runner.get_kv_cache_spec()
    page_sizes = {s.page_size_bytes for s in spec.values()}
    page_size = max(page_sizes)
    try:
        kv_cache_config = get_kv_cache_config(vllm_config, spec, num_blocks * page_size * len(spec))
    except InsufficientKVCacheMemoryError as exc:
        raise HarnessError(f"num_blocks={num_blocks} is too small: {exc}") from None
    if kv_cache_config.num_blocks != num_blocks:
        raise HarnessError(f"could not size the KV cache to {num_blocks} blocks")
    allocations: dict[str, list[Allocation]] = {}

    def record(allocation: Allocation) -> None:
        allocations.setdefault(allocation.region or "", []).append(allocation)

    schedule: list[tuple[int, tuple[tuple[str, int], ...]]] = []
    tracker = MemoryTracker(devices=(torch.device(device).type,), on_alloc=record)
    with tracker, torch.inference_mode():
        with tracker.region(KV_CACHE_REGION):
            runner.initialize_kv_cache(kv_cache_config)
        scheduler = Scheduler(vllm_config.scheduler_config, kv_cache_config)
        for request in workload.requests:
            try:
                scheduler.add_request(
                    Request(request.request_id, [1] * request.prompt_len, request.output_len)
                )
            except ValueError as exc:
                raise HarnessError(f"workload {workload.name!r} does not fit: {exc}") from None
        step = 0
        while scheduler.has_unfinished_requests() and (max_steps is None or step < max_steps):
            with tracker.region(f"step {step}"):
                scheduler_output = scheduler.schedule()
                output = runner.execute_model(scheduler_output)
                scheduler.update_from_output(scheduler_output, output)
            schedule.append(
                (
                    scheduler_output.total_num_scheduled_tokens,
                    tuple(sorted(scheduler_output.num_scheduled_tokens.items())),
                )
            )
            step += 1
        if scheduler.num_preemptions:
            raise HarnessError(
                f"num_blocks={num_blocks} is too small for the workload ({scheduler.num_preemptions} "
                "preemptions): the two runs would not schedule alike; use more blocks"
            )
    return _Run(allocations=allocations, schedule=schedule, page_size_bytes=page_size)


@functools.cache
def _source_text(source: SourceLine) -> str:
    return str(source)


def _site(allocation: Allocation) -> tuple[str, str | None]:
    return allocation.op, None if allocation.source is None else _source_text(allocation.source)


def _scaling_pairs(a: _Run, b: _Run) -> Iterator[tuple[str, Allocation, Allocation | None]]:
    """Pairs whose sizes differ (or that exist in one run only), region by region."""
    for region in sorted(set(a.allocations) | set(b.allocations)):
        left = a.allocations.get(region, [])
        right = b.allocations.get(region, [])
        if [_site(x) for x in left] == [_site(y) for y in right]:
            for x, y in zip(left, right, strict=True):
                if x.nbytes != y.nbytes:
                    yield region, x, y
            continue
        # Different allocation sequences: pair by site occurrence, unmatched ones are findings.
        counts: dict[tuple[str, str | None], list[Allocation]] = {}
        for y in right:
            counts.setdefault(_site(y), []).append(y)
        for x in left:
            candidates = counts.get(_site(x))
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
    regression: str | None = None,
    num_blocks: tuple[int, int] = DEFAULT_NUM_BLOCKS,
    backend: type[AttentionBackend] | None = None,
    device: str = "cpu",
    max_steps: int | None = None,
) -> ScalingReport:
    """Run ``workload`` at two ``num_blocks`` and report what scales (see the module docstring)."""
    a_blocks, b_blocks = num_blocks
    if a_blocks <= 0 or b_blocks <= 0 or a_blocks == b_blocks:
        raise HarnessError(f"num_blocks must be two different positive counts, got {num_blocks}")
    if backend is None:
        backend = FlashInferBackend if regression is None else get_regression(regression).backend
    vllm_config = _vllm_config(model, workload)
    if torch.device(device).type == "cpu" and _weight_bytes(vllm_config) > MAX_CPU_WEIGHT_BYTES:
        raise HarnessError(
            f"{model} is too large to run with real weights on the CPU; use --device meta "
            "(what scales with num_blocks does so at every model size)"
        )
    run_a = _run(vllm_config, backend, workload, a_blocks, device, max_steps)
    run_b = _run(vllm_config, backend, workload, b_blocks, device, max_steps)
    if run_a.schedule != run_b.schedule:
        raise HarnessError("the two runs scheduled differently; cannot compare their allocations")
    report = ScalingReport(
        model=model,
        regression=regression,
        device=device,
        num_blocks=num_blocks,
        num_steps=len(run_a.schedule),
    )
    sites: dict[tuple[str, str, str | None], ScalingAllocation] = {}
    for region, x, y in _scaling_pairs(run_a, run_b):
        y_bytes = 0 if y is None else y.nbytes
        per_block = (y_bytes - x.nbytes) / (b_blocks - a_blocks)
        is_kv_cache = (
            region == KV_CACHE_REGION
            and y is not None
            and x.nbytes == a_blocks * run_a.page_size_bytes
            and y.nbytes == b_blocks * run_b.page_size_bytes
        )
        key = (region if is_kv_cache else "", *_site(x))
        if key in sites:
            sites[key] = replace(sites[key], count=sites[key].count + 1)
            continue
        sites[key] = ScalingAllocation(
            region=region,
            op=x.op,
            source=_site(x)[1],
            line_text="" if x.source is None else x.source.text,
            nbytes=(x.nbytes, y_bytes),
            shape=(tuple(x.shape), () if y is None else tuple(y.shape)),
            bytes_per_block=per_block,
        )
    report.kv_cache = [sites[k] for k in sites if k[0] == KV_CACHE_REGION]
    report.findings = [sites[k] for k in sites if k[0] != KV_CACHE_REGION]
    return report
