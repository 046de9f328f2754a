"""The cascade-attention decision: vLLM's heuristic and the runner's common-prefix length.

vLLM's side calls ``use_cascade_attention`` from ``flash_attn.py`` and
``GPUModelRunner._compute_cascade_attn_prefix_len`` from ``gpu_model_runner.py`` (on a stub runner
holding the batch's computed tokens, head count and SM count) with vLLM's FlashAttention or
FlashInfer builder; the reference's side calls its ``use_cascade_attention`` and
``compute_cascade_attn_prefix_len`` with its own builder of the same backend.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from harness.fidelity.deviation import Deviation
from harness.fidelity.differential import Differential, modules_defining
from harness.fidelity.differentials.batch import DTYPES, vllm_model_config
from harness.fidelity.differentials.builder_deviations import cascade_removed
from harness.fidelity.vllm import VllmCode
from harness.reference import kv_cache_interface
from harness.reference.backends.flash_attn import (
    FlashAttentionMetadataBuilder,
    use_cascade_attention,
)
from harness.reference.backends.flashinfer import FlashInferMetadataBuilder
from harness.reference.backends.utils import compute_cascade_attn_prefix_len
from harness.reference.block_table import BlockTable
from harness.reference.config import ModelConfig, VllmConfig


@dataclass(frozen=True)
class CascadeCase:
    """One batch's inputs to the cascade decision."""

    backend: str  # "FLASH_ATTN" or "FLASHINFER"
    block_size: int
    num_scheduled: tuple[int, ...]
    num_computed: tuple[int, ...]
    num_common_prefix_blocks: int
    num_query_heads: int
    num_kv_heads: int
    window: int | None
    sliding_spec: bool
    """The group's spec is a ``SlidingWindowSpec`` (else a ``FullAttentionSpec`` carrying it)."""
    model_dtype: str
    kv_dtype: str
    num_sms: int
    use_alibi: bool
    """For the direct ``use_cascade_attention`` call (the runner path has no ALiBi)."""
    prefix_len: int
    """``common_prefix_len`` given to ``use_cascade_attention`` directly."""


def generate_cascade(rng: np.random.Generator) -> CascadeCase:
    """Mostly batches near the heuristic's thresholds: >= 8 requests, long prefixes, decodes."""
    num_reqs = int(rng.integers(1, 40))
    decode = rng.random() < 0.6
    block_size = int(rng.choice([16, 32]))
    computed = (
        rng.integers(0, 3000, num_reqs) if rng.random() < 0.3 else rng.integers(200, 3000, num_reqs)
    )
    window = None if rng.random() < 0.85 else int(rng.choice([128, 4096]))
    kv_heads = int(rng.choice([1, 2, 8]))
    model_dtype = str(rng.choice(list(DTYPES)))
    return CascadeCase(
        backend=str(rng.choice(["FLASH_ATTN", "FLASHINFER"])),
        block_size=block_size,
        num_scheduled=tuple(
            1 if decode or rng.random() < 0.3 else int(rng.integers(2, 64)) for _ in range(num_reqs)
        ),
        num_computed=tuple(int(c) for c in computed),
        num_common_prefix_blocks=int(rng.integers(0, 200)) if rng.random() < 0.9 else 0,
        num_query_heads=kv_heads * int(rng.choice([1, 2, 4, 8, 16])),
        num_kv_heads=kv_heads,
        window=window,
        sliding_spec=bool(rng.random() < 0.5),
        model_dtype=model_dtype,
        kv_dtype=model_dtype if rng.random() < 0.8 else "float32",
        num_sms=int(rng.choice([8, 108, 132, 148, 304])),
        use_alibi=bool(rng.random() < 0.1),
        prefix_len=int(rng.integers(0, 4096)),
    )


def shrink_cascade(case: CascadeCase) -> Iterator[CascadeCase]:
    """Fewer requests, then plainer settings."""
    n = len(case.num_scheduled)
    for keep in (8, n // 2, n - 1):
        if 0 < keep < n:
            yield replace(
                case, num_scheduled=case.num_scheduled[:keep], num_computed=case.num_computed[:keep]
            )
    if case.window is not None:
        yield replace(case, window=None)
    if case.use_alibi:
        yield replace(case, use_alibi=False)
    if case.kv_dtype != case.model_dtype:
        yield replace(case, kv_dtype=case.model_dtype)


def _spec(module: Any, case: CascadeCase) -> Any:
    args = (case.block_size, case.num_kv_heads, 128, DTYPES[case.kv_dtype], False)
    if case.window is not None and case.sliding_spec:
        return module.SlidingWindowSpec(*args, sliding_window=case.window)
    return module.FullAttentionSpec(*args, sliding_window=case.window)


def _heuristic_args(case: CascadeCase) -> tuple[Any, tuple[Any, ...]]:
    """The scheduled tokens, and the arguments of the direct ``use_cascade_attention`` call."""
    scheduled = np.array(case.num_scheduled, dtype=np.int32)
    heads = (case.num_query_heads, case.num_kv_heads)
    window = case.window is not None
    return scheduled, (case.prefix_len, scheduled, *heads, case.use_alibi, window, case.num_sms)


def cascade_vllm(vllm: VllmCode, case: CascadeCase) -> object:
    use_cascade_attention = vllm.defining("use_cascade_attention")
    runner_cls = vllm.defining("GPUModelRunner")
    spec = _spec(vllm.module_defining("FullAttentionSpec"), case)
    model_config = vllm_model_config(case.num_query_heads, case.num_kv_heads, 128)
    model_config.dtype = DTYPES[case.model_dtype]
    stub_runner = SimpleNamespace(
        model_config=model_config,
        parallel_config=None,
        vllm_config=SimpleNamespace(compilation_config=SimpleNamespace(full_cuda_graph=False)),
        device=torch.device("cpu"),
    )
    if case.backend == "FLASH_ATTN":
        builder = vllm.defining("FlashAttentionMetadataBuilder")(stub_runner, spec, None)
    else:
        builder = vllm.defining("FlashInferMetadataBuilder")(stub_runner, spec, None)
    num_computed = np.zeros(len(case.num_computed) + 3, dtype=np.int32)
    num_computed[: len(case.num_computed)] = case.num_computed
    fake_runner = SimpleNamespace(
        input_batch=SimpleNamespace(num_computed_tokens_cpu=num_computed),
        num_query_heads=case.num_query_heads,
        use_alibi=False,  # the reference model has no ALiBi; use_alibi is drawn for the heuristic
        num_sms=case.num_sms,
    )
    scheduled, heuristic = _heuristic_args(case)
    return {
        "use_cascade_attention": use_cascade_attention(*heuristic),
        "common_prefix_len": runner_cls._compute_cascade_attn_prefix_len(
            fake_runner, scheduled, case.num_common_prefix_blocks, spec, builder
        ),
    }


def cascade_reference(case: CascadeCase) -> object:
    spec = _spec(kv_cache_interface, case)
    model = ModelConfig(
        num_attention_heads=case.num_query_heads,
        num_key_value_heads=case.num_kv_heads,
        head_dim=128,
        dtype=DTYPES[case.model_dtype],
    )
    table = BlockTable(case.block_size, 1, 1, 1, pin_memory=False, device="cpu")
    builder_cls = (
        FlashAttentionMetadataBuilder if case.backend == "FLASH_ATTN" else FlashInferMetadataBuilder
    )
    builder = builder_cls(spec, table, VllmConfig(model_config=model), "cpu")
    scheduled, heuristic = _heuristic_args(case)
    return {
        "use_cascade_attention": use_cascade_attention(*heuristic),
        "common_prefix_len": compute_cascade_attn_prefix_len(
            builder,
            scheduled,
            np.array(case.num_computed, dtype=np.int32),
            case.num_common_prefix_blocks,
            case.num_query_heads,
            case.num_sms,
        ),
    }


CASCADE_REMOVED = Deviation(
    "cascade-removed",
    "removed cascade attention: no use_cascade_attention heuristic, no common-prefix length from "
    "the runner (every build gets 0); ModelConfig.disable_cascade_attn stays without effect",
    cascade_removed,
    paths=None,
)


CASCADE: Differential[CascadeCase] = Differential(
    name="cascade",
    description="use_cascade_attention, and the common-prefix length the runner passes to build "
    "(capping, rounding, sliding windows, FlashInfer's dtype rule, the SM count)",
    vllm_code="use_cascade_attention (vllm/v1/attention/backends/flash_attn.py); "
    "GPUModelRunner._compute_cascade_attn_prefix_len (vllm/v1/worker/gpu_model_runner.py)",
    vllm_modules=modules_defining(
        "FullAttentionSpec",
        "use_cascade_attention",
        "FlashAttentionMetadataBuilder",
        "FlashInferMetadataBuilder",
        "GPUModelRunner",
    ),
    generate=generate_cascade,
    run_vllm=cascade_vllm,
    run_reference=cascade_reference,
    shrink=shrink_cascade,
    trials=2000,
    deviations=(CASCADE_REMOVED,),
)
