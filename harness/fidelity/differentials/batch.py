"""Random batches for the builder differentials, and both sides' set-up for one batch.

A :class:`BatchCase` is a persistent batch at one step: per request the tokens already computed,
the tokens scheduled now and its block ids (a shared prefix of blocks optional), plus the model's
head layout and the engine limits. Both sides get the same block table rows and the same CPU slot
mapping (``block_ids[pos // block_size] * block_size + pos % block_size``); the slot-mapping
computation itself is compared by the ``runner-inputs`` differential.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, TypeVar

import numpy as np
import torch

from harness.fidelity.differentials.kv_cache import at_default
from harness.reference.batch import common_metadata
from harness.reference.block_table import BlockTable
from harness.reference.common_metadata import CommonAttentionMetadata
from harness.reference.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
from harness.reference.kv_cache_interface import cdiv
from harness.vllm_tree.era import Era

T = TypeVar("T")

BUILDER_CODE = ("FullAttentionSpec", "CommonAttentionMetadata")
"""What every builder differential loads besides its builder: the specs, the common metadata."""
BUILDER_HELPERS = (
    "BlockTable",
    "split_decodes_and_prefills",
    "get_num_attention_heads_from_layers",
    "KVCacheLayout",
)
"""Loaded where the tree has them: vLLM 0.9.0's block table (its builders take one), the
builders' helpers and the KV cache layouts of vLLM 0.34.0."""

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Req:
    """One request of the batch."""

    computed: int
    scheduled: int
    block_ids: tuple[int, ...]

    @property
    def seq_len(self) -> int:
        return self.computed + self.scheduled


@dataclass(frozen=True)
class BatchCase:
    """One step of a persistent batch and the model around it."""

    block_size: int
    reqs: tuple[Req, ...]
    num_heads: int
    num_kv_heads: int
    head_size: int
    dtype: str
    max_model_len: int
    max_num_reqs: int
    max_num_batched_tokens: int
    common_prefix_len: int = 0
    """A multiple of ``block_size`` every request shares and has computed (0: no cascade)."""
    layer_windows: tuple[int | None, ...] = (None, None)
    """Sliding window of each layer of the model (None: full attention)."""

    @property
    def num_tokens(self) -> int:
        return sum(r.scheduled for r in self.reqs)

    def slot_mapping(self) -> list[int]:
        bs = self.block_size
        return [
            r.block_ids[p // bs] * bs + p % bs
            for r in self.reqs
            for p in range(r.computed, r.seq_len)
        ]

    def query_start_loc(self) -> list[int]:
        return [0, *np.cumsum([r.scheduled for r in self.reqs]).tolist()]

    def permuted(self, order: list[int]) -> BatchCase:
        """The same batch with its rows in ``order`` (a batch reordering's result)."""
        return replace(self, reqs=tuple(self.reqs[i] for i in order))


def generate_batch(
    rng: np.random.Generator,
    *,
    block_sizes: tuple[int, ...],
    head_sizes: tuple[int, ...],
    max_reqs: int = 8,
    prefix: bool = True,
) -> BatchCase:
    """Decodes and (chunked) prefills over random lengths, block ids and head layouts."""
    block_size = int(rng.choice(block_sizes))
    num_reqs = int(rng.integers(1, max_reqs + 1))
    shared = int(rng.integers(0, 4)) if prefix and rng.random() < 0.4 else 0
    lengths: list[tuple[int, int]] = []
    for _ in range(num_reqs):
        computed = int(rng.integers(0, 150))
        if shared:
            computed = max(computed, shared * block_size)
        scheduled = 1 if rng.random() < 0.5 else int(rng.integers(2, 40))
        lengths.append((computed, scheduled))
    total_blocks = sum(cdiv(c + s, block_size) for c, s in lengths) + shared + 1
    pool = [int(b) for b in rng.permutation(np.arange(1, total_blocks + 64))]
    prefix_ids = [pool.pop() for _ in range(shared)]
    reqs = tuple(
        Req(c, s, (*prefix_ids, *(pool.pop() for _ in range(cdiv(c + s, block_size) - shared))))
        for c, s in lengths
    )
    num_heads_per_kv = int(rng.choice([1, 2, 4, 8]))
    num_kv_heads = int(rng.choice([1, 2, 4]))
    max_len = max(r.seq_len for r in reqs)
    common = 0
    if shared:
        limit = min(shared * block_size, min(r.computed for r in reqs))
        common = limit // block_size * block_size
    return BatchCase(
        block_size=block_size,
        reqs=reqs,
        num_heads=num_kv_heads * num_heads_per_kv,
        num_kv_heads=num_kv_heads,
        head_size=int(rng.choice(head_sizes)),
        dtype=str(rng.choice(list(DTYPES))),
        # Room for the token this step samples (a runner writes it at index seq_len).
        max_model_len=max_len + 1 + int(rng.integers(0, 3 * block_size)),
        max_num_reqs=num_reqs + int(rng.integers(0, 4)),
        max_num_batched_tokens=sum(s for _, s in lengths) + int(rng.integers(0, 16)),
        common_prefix_len=common if rng.random() < 0.8 else 0,
    )


def _fit(case: BatchCase, reqs: tuple[Req, ...]) -> BatchCase:
    """``case`` with ``reqs``: block ids trimmed to the new lengths, the prefix still valid."""
    bs = case.block_size
    reqs = tuple(replace(r, block_ids=r.block_ids[: cdiv(r.seq_len, bs)]) for r in reqs)
    common = min(case.common_prefix_len, min(r.computed for r in reqs) // bs * bs)
    shared = 0
    first = reqs[0].block_ids
    while shared < len(first) and all(
        len(r.block_ids) > shared and r.block_ids[shared] == first[shared] for r in reqs
    ):
        shared += 1
    return replace(case, reqs=reqs, common_prefix_len=min(common, shared * bs))


def shrink_batch(case: BatchCase) -> Iterator[BatchCase]:
    """Fewer requests, shorter requests, no prefix, fewer heads."""
    reqs = case.reqs
    for i in range(len(reqs)):
        if len(reqs) > 1:
            yield _fit(case, reqs[:i] + reqs[i + 1 :])
    for i, r in enumerate(reqs):
        for computed in {0, r.computed // 2, r.computed - 1} - {r.computed}:
            if computed >= 0:
                yield _fit(case, (*reqs[:i], replace(r, computed=computed), *reqs[i + 1 :]))
        for scheduled in {1, r.scheduled // 2} - {r.scheduled, 0}:
            yield _fit(case, (*reqs[:i], replace(r, scheduled=scheduled), *reqs[i + 1 :]))
    if case.common_prefix_len:
        yield replace(case, common_prefix_len=0)
    if case.num_heads > case.num_kv_heads:
        yield replace(case, num_heads=case.num_kv_heads)
    if case.num_kv_heads > 1:
        yield replace(case, num_kv_heads=1, num_heads=case.num_heads // case.num_kv_heads)


def show_batch(case: BatchCase) -> str:
    """The case on one line, block ids included."""
    reqs = "; ".join(
        f"computed={r.computed} scheduled={r.scheduled} blocks={list(r.block_ids)}"
        for r in case.reqs
    )
    return (
        f"block_size={case.block_size} heads={case.num_heads}/{case.num_kv_heads} "
        f"head_size={case.head_size} {case.dtype} common_prefix_len={case.common_prefix_len} "
        f"layer_windows={list(case.layer_windows)} max_model_len={case.max_model_len} "
        f"max_num_reqs={case.max_num_reqs} max_num_batched_tokens={case.max_num_batched_tokens} "
        f"requests: {reqs}"
    )


# Reordering -------------------------------------------------------------------------------------


class RecordingInputBatch:
    """What ``reorder_batch`` touches: request ids, and ``swap_states`` (recorded)."""

    def __init__(self, num_reqs: int) -> None:
        self.req_ids = [f"r{i}" for i in range(num_reqs)]
        self.swaps: list[list[int]] = []

    def swap_states(self, i1: int, i2: int) -> None:
        self.swaps.append([i1, i2])
        self.req_ids[i1], self.req_ids[i2] = self.req_ids[i2], self.req_ids[i1]

    @property
    def order(self) -> list[int]:
        return [int(r[1:]) for r in self.req_ids]


def reorder(
    case: BatchCase, reorder_batch: Callable[[Any, Any], bool]
) -> tuple[BatchCase, dict[str, Any]]:
    """Run a builder's ``reorder_batch`` on ``case``: the reordered case and what it did."""
    batch = RecordingInputBatch(len(case.reqs))
    scheduler_output = SimpleNamespace(
        num_scheduled_tokens={f"r{i}": r.scheduled for i, r in enumerate(case.reqs)}
    )
    modified = reorder_batch(batch, scheduler_output)
    return case.permuted(batch.order), {"modified": modified, "swaps": batch.swaps}


# The two sides' set-up --------------------------------------------------------------------------


def max_blocks_per_req(case: BatchCase) -> int:
    return cdiv(case.max_model_len, case.block_size)


def fill_block_table(table: Any, case: BatchCase) -> Any:
    """Rows, commit, and the CPU slot mapping of ``case`` in either side's ``BlockTable``."""
    for i, r in enumerate(case.reqs):
        table.add_row(list(r.block_ids), i)
    table.commit(len(case.reqs))
    slots = case.slot_mapping()
    table.slot_mapping_np[: len(slots)] = slots
    return table


def _table_args(case: BatchCase) -> tuple[int, int, int, bool]:
    """``max_num_reqs, max_num_blocks_per_req, max_num_batched_tokens, pin_memory``."""
    return case.max_num_reqs, max_blocks_per_req(case), case.max_num_batched_tokens, False


def reference_block_table(case: BatchCase) -> BlockTable:
    table = BlockTable(case.block_size, *_table_args(case), "cpu")
    fill_block_table(table, case)
    return table


def vllm_block_table(block_table_module: Any, case: BatchCase) -> Any:
    table = block_table_module.BlockTable(*_table_args(case), torch.device("cpu"))
    return fill_block_table(table, case)


def reference_config(case: BatchCase) -> VllmConfig:
    """The reference's config: the model's heads, dtype and per-layer windows."""
    windows = {w for w in case.layer_windows if w is not None}
    model = ModelConfig(
        num_hidden_layers=len(case.layer_windows),
        num_attention_heads=case.num_heads,
        num_key_value_heads=case.num_kv_heads,
        head_dim=case.head_size,
        dtype=DTYPES[case.dtype],
        max_model_len=case.max_model_len,
        sliding_window=windows.pop() if windows else None,
        layer_types=tuple(
            "full_attention" if w is None else "sliding_attention" for w in case.layer_windows
        ),
    )
    return VllmConfig(
        model_config=model,
        cache_config=CacheConfig(block_size=case.block_size),
        scheduler_config=SchedulerConfig(
            max_num_seqs=case.max_num_reqs,
            max_num_batched_tokens=case.max_num_batched_tokens,
            max_model_len=case.max_model_len,
        ),
    )


def reference_common(case: BatchCase) -> CommonAttentionMetadata:
    """``CommonAttentionMetadata`` as the reference runner builds it for ``case``."""
    return common_metadata([r.computed for r in case.reqs], [r.scheduled for r in case.reqs])


def returns(value: T) -> Callable[..., T]:
    """A function that takes any arguments and returns ``value`` (for stub methods)."""
    return lambda *_: value


def vllm_model_config(num_heads: int, num_kv_heads: int, head_size: int) -> SimpleNamespace:
    """The ``ModelConfig`` methods vLLM's builders call for head counts and sizes, and the MLA
    dimensions vLLM 0.9.0's MLA builder reads (``get_mla_dims``): a latent of ``head_size`` is
    ``kv_lora_rank`` plus 64 rotary dimensions, as DeepSeek's 576 = 512 + 64."""
    mla_dims = SimpleNamespace(
        q_lora_rank=None,
        kv_lora_rank=head_size - 64,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
    )
    return SimpleNamespace(
        get_num_attention_heads=returns(num_heads),
        get_num_kv_heads=returns(num_kv_heads),
        get_head_size=returns(head_size),
        hf_text_config=mla_dims,
    )


def vllm_runner(case: BatchCase, layers: dict[str, Any] | None = None) -> SimpleNamespace:
    """The attributes of ``GPUModelRunner`` that vLLM 0.9.0's builders read, for ``case``."""
    n = len(case.reqs)
    query_start_loc_np = np.zeros(case.max_num_reqs + 1, dtype=np.int32)
    query_start_loc_np[: n + 1] = case.query_start_loc()
    seq_lens_np = np.zeros(case.max_num_reqs, dtype=np.int32)
    seq_lens_np[:n] = [r.seq_len for r in case.reqs]
    dtype = DTYPES[case.dtype]
    model_config = vllm_model_config(case.num_heads, case.num_kv_heads, case.head_size)
    model_config.dtype = dtype
    model_config.max_model_len = case.max_model_len
    computed = torch.zeros(case.max_num_reqs, dtype=torch.int32)
    computed[:n] = torch.tensor([r.computed for r in case.reqs], dtype=torch.int32)
    return SimpleNamespace(
        model_config=model_config,
        parallel_config=None,
        vllm_config=SimpleNamespace(
            compilation_config=SimpleNamespace(
                full_cuda_graph=False, static_forward_context=dict(layers or {})
            )
        ),
        scheduler_config=SimpleNamespace(
            chunked_prefill_enabled=False, max_num_seqs=case.max_num_reqs
        ),
        cache_config=SimpleNamespace(block_size=case.block_size),
        device=torch.device("cpu"),
        dtype=dtype,
        num_query_heads=case.num_heads,
        attention_chunk_size=None,
        seq_lens_np=seq_lens_np,
        query_start_loc_np=query_start_loc_np,
        input_batch=SimpleNamespace(num_computed_tokens_cpu_tensor=computed),
    )


def vllm_common(utils_module: Any, case: BatchCase) -> Any:
    """vLLM 0.9.0's ``CommonAttentionMetadata`` (device tensors only) for ``case``."""
    return utils_module.CommonAttentionMetadata(
        query_start_loc=torch.tensor(case.query_start_loc(), dtype=torch.int32),
        seq_lens=torch.tensor([r.seq_len for r in case.reqs], dtype=torch.int32),
    )


def vllm_build(builder: Any, common: Any, case: BatchCase, common_prefix_len: int) -> Any:
    """vLLM 0.9.0's ``build`` signature."""
    return builder.build(
        num_reqs=len(case.reqs),
        num_actual_tokens=case.num_tokens,
        max_query_len=max(r.scheduled for r in case.reqs),
        common_prefix_len=common_prefix_len,
        common_attn_metadata=common,
    )


def fields_beyond(
    metadata: Any, reference_cls: type[Any], *, skip: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A later vLLM's metadata dataclass as the reference's class has it: the fields both have
    (less ``skip``), and a field only vLLM has where it is neither None nor at its default (a
    feature in use that the reference does not model: a difference)."""
    shared = {f.name for f in dataclasses.fields(reference_cls)}
    shown: dict[str, Any] = {}
    for f in dataclasses.fields(metadata):
        value = getattr(metadata, f.name)
        unused = value is None or at_default(f, value)
        if f.name not in skip and (f.name in shared or not unused):
            shown[f.name] = value
    return shown


def metadata_fields(
    metadata: Any, *, skip: tuple[str, ...] = (), none_only: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A metadata dataclass's fields, less ``skip``; ``none_only`` fields (vLLM features the
    reference does not model) are dropped when None, and show up as a difference otherwise."""
    values = {f.name: getattr(metadata, f.name) for f in dataclasses.fields(metadata)}
    return {
        name: value
        for name, value in values.items()
        if name not in skip and not (name in none_only and value is None)
    }


# vLLM 0.34.0's builders (the spec era) ------------------------------------------------------------


def spec_era_config(
    case: BatchCase, layers: dict[str, Any] | None = None, **model: Any
) -> SimpleNamespace:
    """The ``VllmConfig`` fields vLLM 0.34.0's builders read for ``case``: one rank, no CUDA
    graphs, no speculative decoding, no JIT warm-up, the model's heads and dtype (``model``
    adds model-config fields), ``layers`` as the forward context."""
    model_config = vllm_model_config(case.num_heads, case.num_kv_heads, case.head_size)
    model_config.__dict__.update(
        dtype=DTYPES[case.dtype],
        max_model_len=case.max_model_len,
        rswa_window=None,
        is_mm_prefix_lm=False,
        **model,
    )
    return SimpleNamespace(
        model_config=model_config,
        parallel_config=SimpleNamespace(
            tensor_parallel_size=1,
            pipeline_parallel_size=1,
            decode_context_parallel_size=1,
            prefill_context_parallel_size=1,
            cp_kv_cache_interleave_size=1,
        ),
        cache_config=SimpleNamespace(block_size=case.block_size, cache_dtype="auto"),
        compilation_config=SimpleNamespace(
            cudagraph_mode=SimpleNamespace(has_full_cudagraphs=returns(False)),
            max_cudagraph_capture_size=None,
            static_forward_context=dict(layers or {}),
        ),
        attention_config=SimpleNamespace(  # AttentionConfig's defaults
            use_prefill_query_quantization=False,
            use_trtllm_attention=None,
            disable_flashinfer_q_quantization=False,
        ),
        kernel_config=SimpleNamespace(enable_jit_warmup=False),
        scheduler_config=SimpleNamespace(
            max_num_seqs=case.max_num_reqs,
            max_num_batched_tokens=case.max_num_batched_tokens,
            chunked_prefill_enabled=True,
        ),
        speculative_config=None,
    )


def runner_order(vllm: Any, case: BatchCase) -> BatchCase:
    """``case`` in the order vLLM 0.34.0's runner hands a batch to its builders: its own
    ``sort_batch_req_ids`` (decodes first, then by query length), executed; in the runner era
    (builders reorder themselves) ``case`` unchanged."""
    if vllm.era is not Era.SPEC:
        return case
    scheduled = {f"r{i}": r.scheduled for i, r in enumerate(case.reqs)}
    order = vllm.helper("sort_batch_req_ids", beside="GPUModelRunner")(scheduled, {}, 1)
    return case.permuted([int(req_id[1:]) for req_id in order])


def spec_era_block_table(specs_module: Any, spec: Any, config: Any, case: BatchCase) -> Any:
    """The group's block table as vLLM 0.34.0's runner hands it to a builder: one row per
    request, as wide as ``max_num_blocks_per_req`` aligned by ``get_block_table_width`` (the
    runner's own calls, ``vllm/v1/worker/gpu/model_runner.py``), zeros past each row's blocks."""
    width = specs_module.get_block_table_width(
        spec.max_num_blocks_per_req(config, case.max_model_len),
        spec.block_size,
        token_alignment=spec.block_table_token_alignment,
    )
    table = torch.zeros((len(case.reqs), width), dtype=torch.int32)
    for i, r in enumerate(case.reqs):
        table[i, : len(r.block_ids)] = torch.tensor(r.block_ids, dtype=torch.int32)
    return table


def spec_era_common(common_cls: Any, case: BatchCase, block_table: Any) -> Any:
    """vLLM 0.34.0's ``CommonAttentionMetadata`` for ``case``, with the fields its runner fills
    for a synchronous step of a text model: exact lengths, the slots of the scheduled tokens."""
    query_start_loc = torch.tensor(case.query_start_loc(), dtype=torch.int32)
    seq_lens = torch.tensor([r.seq_len for r in case.reqs], dtype=torch.int32)
    return common_cls(
        query_start_loc=query_start_loc,
        query_start_loc_cpu=query_start_loc.clone(),
        seq_lens=seq_lens,
        seq_lens_cpu_upper_bound=seq_lens.clone(),
        num_reqs=len(case.reqs),
        num_actual_tokens=case.num_tokens,
        max_query_len=max(r.scheduled for r in case.reqs),
        max_seq_len=max(r.seq_len for r in case.reqs),
        block_table_tensor=block_table,
        slot_mapping=torch.tensor(case.slot_mapping(), dtype=torch.int64),
    )
