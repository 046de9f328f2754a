"""FlashInfer-style backend (vLLM 0.9.0 ``vllm/v1/attention/backends/flashinfer.py``).

KV cache ``(num_blocks, 2, block_size, num_kv_heads, head_size)``; head sizes 64, 128 or 256, and
all layers must share window, soft cap and scale (vLLM's checks). The builder reorders the batch
decode-first and describes each request's pages CSR-style from the CPU block table (so ``meta``
works); like 0.9.0 it copies the CPU slot mapping to a fresh device tensor. Each per-step tensor
comes from a small named method a variant can override. :func:`plan_calls` is what the wrappers
are planned with (real ones with CUDA and ``flashinfer``); the impl computes with the oracle.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
from dataclasses import dataclass
from typing import Any

import torch

from harness.errors import HarnessError
from harness.reference.backends.abstract import (
    AttentionBackend,
    AttentionImpl,
    AttentionMetadataBuilder,
    InputBatchLike,
    SchedulerOutputLike,
)
from harness.reference.backends.flash_attn import use_cascade_attention
from harness.reference.backends.utils import (
    compute_paged_kv_indices,
    compute_paged_kv_indptr,
    compute_paged_kv_last_page_len,
    reorder_batch_to_split_decodes_and_prefills,
    slot_mapping_to_device,
    split_decodes_and_prefills,
)
from harness.reference.block_table import BlockTable
from harness.reference.common_metadata import CommonAttentionMetadata
from harness.reference.config import VllmConfig
from harness.reference.kv_cache_interface import AttentionSpec
from harness.reference.oracle import (
    merge_attn_states,
    paged_attention,
    reshape_and_cache,
    to_int_list,
)

FLASHINFER_WORKSPACE_BUFFER_SIZE = 256 * 1024 * 1024
"""Bytes of FlashInfer's workspace buffer (vLLM 0.9.0's constant)."""


class FlashInferBackend(AttentionBackend):
    """FlashInfer: each block holds its K and V pages side by side."""

    @staticmethod
    def get_supported_head_sizes() -> list[int]:
        return [64, 128, 256]

    @staticmethod
    def get_name() -> str:
        return "FLASHINFER_VLLM_V1"

    @staticmethod
    def get_kv_cache_shape(
        num_blocks: int, block_size: int, num_kv_heads: int, head_size: int
    ) -> tuple[int, ...]:
        return (num_blocks, 2, block_size, num_kv_heads, head_size)

    @staticmethod
    def get_builder_cls() -> type[FlashInferMetadataBuilder]:
        return FlashInferMetadataBuilder

    @staticmethod
    def get_metadata_cls() -> type[FlashInferMetadata]:
        return FlashInferMetadata

    @staticmethod
    def get_impl_cls() -> type[FlashInferImpl]:
        return FlashInferImpl


@dataclass(frozen=True)
class PerLayerParameters:
    """One attention layer's planning parameters (vLLM's ``PerLayerParameters``)."""

    window_left: int
    """``sliding_window - 1``, or -1 without a window."""
    logits_soft_cap: float | None
    sm_scale: float


def get_per_layer_parameters(vllm_config: VllmConfig) -> dict[str, PerLayerParameters]:
    """Every attention layer, by vLLM's layer name, with its planning parameters (from the model
    config: a window per layer type, no soft cap, scale ``head_dim ** -0.5``).
    """
    model_config = vllm_config.model_config
    sm_scale = model_config.head_dim**-0.5
    per_layer_params: dict[str, PerLayerParameters] = {}
    for i in range(model_config.num_hidden_layers):
        window = model_config.layer_sliding_window(i)
        per_layer_params[f"model.layers.{i}.self_attn.attn"] = PerLayerParameters(
            window_left=-1 if window is None else window - 1,
            logits_soft_cap=None,
            sm_scale=sm_scale,
        )
    return per_layer_params


def infer_global_hyperparameters(
    per_layer_params: dict[str, PerLayerParameters],
) -> PerLayerParameters:
    """The parameters every layer shares; vLLM's ``AssertionError`` when layers differ (vLLM 0.9.0
    checks every attention layer of the MODEL, not only the builder's group).
    """
    if not per_layer_params:
        raise AssertionError("No attention layers found in the model.")
    param_sets = list(per_layer_params.values())
    global_params = param_sets[0]
    if any(params != global_params for params in param_sets):
        raise AssertionError(
            "FlashInfer backend currently only supports models in which all layers share the "
            "same values for the following hyperparameters: `window_left`, `logits_soft_cap`, "
            "`sm_scale`."
        )
    return global_params


def refuse_mixed_layers(vllm_config: VllmConfig) -> None:
    """A one-line :class:`HarnessError`, before anything runs, for a model whose first FlashInfer
    plan would fail on :func:`infer_global_hyperparameters` (drivers call it; the builder keeps
    vLLM's ``AssertionError``)."""
    try:
        infer_global_hyperparameters(get_per_layer_parameters(vllm_config))
    except AssertionError as exc:
        name = vllm_config.model_config.name
        raise HarnessError(f"{name} cannot run on FlashInfer (as in vLLM 0.9.0): {exc}") from None


@dataclass
class FlashInferMetadata:
    """One group's metadata for one step; decodes are requests ``[0, num_decodes)``."""

    num_actual_tokens: int
    """Scheduled tokens, without padding."""
    qo_indptr: torch.Tensor
    """(num_reqs + 1,) int32: start of each request's query tokens (``query_start_loc``)."""
    paged_kv_indptr: torch.Tensor
    """(num_reqs + 1,) int32: start of each request's pages in ``paged_kv_indices``."""
    paged_kv_indices: torch.Tensor
    """(total_pages,) int32: the pages (block ids) of every request, concatenated."""
    paged_kv_last_page_len: torch.Tensor
    """(num_reqs,) int32: tokens in each request's last page, in ``[1, page_size]``."""
    num_qo_heads: int
    num_kv_heads: int
    head_dim: int
    page_size: int
    """Tokens per page (the group's block size)."""
    data_type: torch.dtype
    q_data_type: torch.dtype
    slot_mapping: torch.Tensor
    """(num_actual_tokens,) int64: cache slot of each token (device buffer tail is -1)."""
    num_decodes: int
    """Requests with one scheduled token, at the front of the batch."""
    num_decode_tokens: int
    num_prefills: int
    """The other requests."""
    num_prefill_tokens: int
    use_cascade: bool
    """Whether a shared prefix is attended separately (then the paged_kv_* exclude it)."""
    shared_qo_indptr: torch.Tensor | None = None
    """(2,) int32 ``[0, num_actual_tokens]``: every token queries the shared prefix."""
    shared_kv_page_indptr: torch.Tensor | None = None
    """(2,) int32 ``[0, num_common_kv_blocks]``."""
    shared_kv_page_indices: torch.Tensor | None = None
    """(num_common_kv_blocks,) int32: the shared prefix's pages."""
    shared_kv_last_page_len: torch.Tensor | None = None
    """(1,) int32 ``[page_size]``: the shared prefix ends on a page boundary."""
    prefill_wrapper: Any = None
    """A planned ``BatchPrefillWithPagedKVCacheWrapper`` (CUDA + flashinfer only)."""
    decode_wrapper: Any = None
    """A planned ``BatchDecodeWithPagedKVCacheWrapper`` (CUDA + flashinfer only)."""
    cascade_wrapper: Any = None
    """A planned ``MultiLevelCascadeAttentionWrapper`` (CUDA + flashinfer only)."""

    @property
    def query_start_loc(self) -> torch.Tensor:
        """(num_reqs + 1,) int32: ``qo_indptr`` under the runner's name."""
        return self.qo_indptr

    def __post_init__(self) -> None:
        supported = FlashInferBackend.get_supported_head_sizes()
        if self.head_dim not in supported:
            raise ValueError(
                f"Only {supported} are supported for head_dim, received {self.head_dim}."
            )


@dataclass(frozen=True)
class PlanCall:
    """One FlashInfer wrapper and exactly what the builder passes to its constructor and ``plan``.

    ``wrapper`` is ``"prefill"``, ``"decode"`` or ``"cascade"``; ``init_args`` omit the workspace
    buffer (the first constructor argument of the first two, the second of the cascade wrapper).
    """

    wrapper: str
    init_args: tuple[Any, ...]
    init_kwargs: dict[str, Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def plan_calls(
    md: FlashInferMetadata, params: PerLayerParameters, use_tensor_cores: bool
) -> list[PlanCall]:
    """The wrappers vLLM 0.9.0's ``_plan`` plans for ``md``, in its order, with its arguments.

    Cascade: one two-level wrapper over the shared prefix and the per-request suffixes. Otherwise
    prefills (rows after the decodes, ``qo_indptr`` rebased to 0) and decodes, each if present.
    """
    heads = (md.num_qo_heads, md.num_kv_heads, md.head_dim, md.page_size)
    common: dict[str, Any] = {
        "sm_scale": params.sm_scale,
        "window_left": params.window_left,
        "logits_soft_cap": params.logits_soft_cap,
        "q_data_type": md.q_data_type,
    }
    if md.use_cascade:
        return [
            PlanCall(
                "cascade",
                (2, "NHD"),
                {},
                (
                    [md.shared_qo_indptr, md.qo_indptr],
                    [md.shared_kv_page_indptr, md.paged_kv_indptr],
                    [md.shared_kv_page_indices, md.paged_kv_indices],
                    [md.shared_kv_last_page_len, md.paged_kv_last_page_len],
                    *heads,
                ),
                {"causal": True, **common},
            )
        ]
    calls: list[PlanCall] = []
    if md.num_prefills > 0:
        start = md.num_decodes
        calls.append(
            PlanCall(
                "prefill",
                ("NHD",),
                {},
                (
                    md.qo_indptr[start:] - md.qo_indptr[start],
                    md.paged_kv_indptr[start:],
                    md.paged_kv_indices,
                    md.paged_kv_last_page_len[start:],
                    *heads,
                ),
                {"causal": True, **common, "kv_data_type": md.data_type},
            )
        )
    if md.num_decodes > 0:
        calls.append(
            PlanCall(
                "decode",
                ("NHD",),
                {"use_tensor_cores": use_tensor_cores},
                (
                    md.paged_kv_indptr[: md.num_decodes + 1],
                    md.paged_kv_indices,
                    md.paged_kv_last_page_len[: md.num_decodes],
                    *heads,
                ),
                {"pos_encoding_mode": "NONE", **common, "kv_data_type": md.data_type},
            )
        )
    return calls


def flashinfer_available(device: torch.device) -> bool:
    """Whether real FlashInfer wrappers can be planned on ``device``."""
    return device.type == "cuda" and importlib.util.find_spec("flashinfer") is not None


class FlashInferMetadataBuilder(AttentionMetadataBuilder[FlashInferMetadata]):
    """Decode-first reordering, CSR page tensors, a lazy workspace and (on CUDA) real plans."""

    def __init__(
        self,
        kv_cache_spec: AttentionSpec,
        block_table: BlockTable,
        vllm_config: VllmConfig,
        device: torch.device | str,
    ) -> None:
        super().__init__(kv_cache_spec, block_table, vllm_config, device)
        model_config = self._get_vllm_config().model_config
        self.num_qo_heads = model_config.num_attention_heads
        self.q_data_type = model_config.dtype
        self.use_tensor_cores = (
            model_config.num_attention_heads // model_config.num_key_value_heads > 4
        )
        """The decode wrapper's kernel choice (vLLM's rule, without its forcing env variable)."""
        self.global_hyperparameters: PerLayerParameters | None = None
        self._workspace_buffer: torch.Tensor | None = None
        self._wrappers: dict[str, Any] = {}

    def reorder_batch(
        self, input_batch: InputBatchLike, scheduler_output: SchedulerOutputLike
    ) -> bool:
        return reorder_batch_to_split_decodes_and_prefills(
            input_batch, scheduler_output, decode_threshold=1
        )

    def _get_workspace_buffer(self) -> torch.Tensor:
        """FlashInfer's workspace: allocated on first use, then reused by every step."""
        if self._workspace_buffer is None:
            self._workspace_buffer = torch.empty(
                FLASHINFER_WORKSPACE_BUFFER_SIZE, dtype=torch.uint8, device=self.device
            )
        return self._workspace_buffer

    def _get_global_hyperparameters(self) -> PerLayerParameters:
        """Scale, window and soft cap every layer of the model shares (read once, on first plan)."""
        if self.global_hyperparameters is None:
            self.global_hyperparameters = infer_global_hyperparameters(
                get_per_layer_parameters(self._get_vllm_config())
            )
        return self.global_hyperparameters

    # Per-step tensors (CPU side; shapes depend on the data) ----------------------------------

    def _compute_paged_kv_indptr(self, seq_lens_cpu: torch.Tensor) -> torch.Tensor:
        """(num_reqs + 1,) int32 on the CPU."""
        return compute_paged_kv_indptr(seq_lens_cpu, self.kv_cache_spec.block_size)

    def _compute_paged_kv_indices(
        self, block_table_cpu: torch.Tensor, seq_lens_cpu: torch.Tensor
    ) -> torch.Tensor:
        """(total_pages,) int32 on the CPU."""
        return compute_paged_kv_indices(
            block_table_cpu, seq_lens_cpu, self.kv_cache_spec.block_size
        )

    def _compute_paged_kv_last_page_len(self, seq_lens_cpu: torch.Tensor) -> torch.Tensor:
        """(num_reqs,) int32 on the CPU."""
        return compute_paged_kv_last_page_len(seq_lens_cpu, self.kv_cache_spec.block_size)

    def build(
        self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata
    ) -> FlashInferMetadata:
        num_reqs = common_attn_metadata.num_reqs
        num_actual_tokens = common_attn_metadata.num_actual_tokens
        page_size = self.kv_cache_spec.block_size
        split = split_decodes_and_prefills(common_attn_metadata)
        seq_lens_cpu = common_attn_metadata.seq_lens_cpu[:num_reqs]
        block_table_cpu = self.block_table.get_cpu_tensor()[:num_reqs]

        if common_prefix_len % page_size:
            raise ValueError(f"{common_prefix_len=} is not a multiple of {page_size=}")
        use_cascade = common_prefix_len > 0
        shared_qo_indptr = shared_kv_page_indptr = None
        shared_kv_page_indices = shared_kv_last_page_len = None
        if use_cascade:
            num_common_kv_blocks = common_prefix_len // page_size
            shared_qo_indptr = torch.tensor([0, num_actual_tokens], dtype=torch.int32)
            shared_kv_page_indptr = torch.tensor([0, num_common_kv_blocks], dtype=torch.int32)
            shared_kv_page_indices = block_table_cpu[0, :num_common_kv_blocks].clone()
            shared_kv_last_page_len = torch.tensor([page_size], dtype=torch.int32)
            # The shared prefix is attended once; each request keeps only its own pages.
            block_table_cpu = block_table_cpu[:, num_common_kv_blocks:]
            seq_lens_cpu = seq_lens_cpu - common_prefix_len

        def to_device(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(self.device, non_blocking=True)

        attn_metadata = FlashInferMetadata(
            num_actual_tokens=num_actual_tokens,
            qo_indptr=common_attn_metadata.query_start_loc,
            paged_kv_indptr=self._compute_paged_kv_indptr(seq_lens_cpu).to(self.device),
            paged_kv_indices=self._compute_paged_kv_indices(block_table_cpu, seq_lens_cpu).to(
                self.device
            ),
            paged_kv_last_page_len=self._compute_paged_kv_last_page_len(seq_lens_cpu).to(
                self.device
            ),
            num_qo_heads=self.num_qo_heads,
            num_kv_heads=self.kv_cache_spec.num_kv_heads,
            head_dim=self.kv_cache_spec.head_size,
            page_size=page_size,
            data_type=self.kv_cache_spec.dtype,
            q_data_type=self.q_data_type,
            slot_mapping=slot_mapping_to_device(self.block_table, num_actual_tokens, self.device),
            num_decodes=split.num_decodes,
            num_decode_tokens=split.num_decode_tokens,
            num_prefills=split.num_prefills,
            num_prefill_tokens=split.num_prefill_tokens,
            use_cascade=use_cascade,
            shared_qo_indptr=to_device(shared_qo_indptr),
            shared_kv_page_indptr=to_device(shared_kv_page_indptr),
            shared_kv_page_indices=to_device(shared_kv_page_indices),
            shared_kv_last_page_len=to_device(shared_kv_last_page_len),
        )
        self._plan(attn_metadata)
        return attn_metadata

    def _plan(self, attn_metadata: FlashInferMetadata) -> None:
        """Allocate the workspace (first build only); on CUDA with flashinfer, plan the wrappers.

        The global hyperparameters are inferred on the first plan, as vLLM 0.9.0 does.
        """
        self._get_workspace_buffer()
        calls = plan_calls(attn_metadata, self._get_global_hyperparameters(), self.use_tensor_cores)
        if not flashinfer_available(self.device):
            return
        flashinfer: Any = importlib.import_module("flashinfer")  # lazy: GPU only
        classes = {
            "prefill": flashinfer.BatchPrefillWithPagedKVCacheWrapper,
            "decode": flashinfer.BatchDecodeWithPagedKVCacheWrapper,
            "cascade": flashinfer.MultiLevelCascadeAttentionWrapper,
        }
        for call in calls:
            wrapper = self._wrappers.get(call.wrapper)
            if wrapper is None:
                workspace = self._get_workspace_buffer()
                init_args = (
                    (call.init_args[0], workspace, *call.init_args[1:])
                    if call.wrapper == "cascade"
                    else (workspace, *call.init_args)
                )
                wrapper = classes[call.wrapper](*init_args, **call.init_kwargs)
                self._wrappers[call.wrapper] = wrapper
            wrapper.plan(*call.args, **call.kwargs)
            setattr(attn_metadata, f"{call.wrapper}_wrapper", wrapper)

    def use_cascade_attention(self, *args: Any, **kwargs: Any) -> bool:
        if self.kv_cache_spec.dtype != self.q_data_type:
            return False  # FlashInfer's cascade wrapper needs the KV and query dtypes to match.
        return use_cascade_attention(*args, **kwargs)


def paged_kv_to_block_table(
    paged_kv_indptr: torch.Tensor,
    paged_kv_indices: torch.Tensor,
    paged_kv_last_page_len: torch.Tensor,
    page_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Invert the CSR page description: a zero-padded block table and the sequence lengths."""
    indptr = to_int_list(paged_kv_indptr)
    num_pages = [end - start for start, end in itertools.pairwise(indptr)]
    device = paged_kv_indices.device
    width = max(num_pages, default=0)
    pages = torch.tensor(num_pages, dtype=torch.int32, device=device)
    block_table = torch.zeros(len(num_pages), width, dtype=torch.int32, device=device)
    filled = torch.arange(width, device=device) < pages.unsqueeze(1)
    block_table[filled] = paged_kv_indices[indptr[0] : indptr[-1]].to(torch.int32)
    seq_lens = (pages - 1) * page_size + paged_kv_last_page_len.to(device)
    return block_table, seq_lens


class FlashInferImpl(AttentionImpl[FlashInferMetadata]):
    """Attends from the CSR page tensors alone (decodes, then prefills, or cascade)."""

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: FlashInferMetadata | None,
    ) -> torch.Tensor:
        output = self._empty_output(query)
        if attn_metadata is None or query.is_meta:
            return output
        md = attn_metadata
        key_cache, value_cache = kv_cache[:, 0], kv_cache[:, 1]
        reshape_and_cache(key, value, key_cache, value_cache, md.slot_mapping)

        def attend(
            q: torch.Tensor,
            qo_indptr: torch.Tensor,
            indptr: torch.Tensor,
            last_page_len: torch.Tensor,
            indices: torch.Tensor,
            causal: bool = True,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            block_table, seq_lens = paged_kv_to_block_table(
                indptr, indices, last_page_len, md.page_size
            )
            return paged_attention(
                q,
                key_cache,
                value_cache,
                query_start_loc=qo_indptr - qo_indptr[0],
                seq_lens=seq_lens,
                block_table=block_table,
                scale=self.scale,
                sliding_window=self.sliding_window,
                causal=causal,
            )

        n, nd = md.num_actual_tokens, md.num_decodes
        q = query[:n]
        if md.use_cascade:
            assert md.shared_qo_indptr is not None and md.shared_kv_page_indptr is not None
            assert md.shared_kv_last_page_len is not None and md.shared_kv_page_indices is not None
            if self.sliding_window is not None:
                raise ValueError("cascade attention does not support a sliding window")
            prefix = attend(
                q,
                md.shared_qo_indptr,
                md.shared_kv_page_indptr,
                md.shared_kv_last_page_len,
                md.shared_kv_page_indices,
                causal=False,
            )
            suffix = attend(
                q, md.qo_indptr, md.paged_kv_indptr, md.paged_kv_last_page_len, md.paged_kv_indices
            )
            output[:n] = merge_attn_states(*prefix, *suffix).flatten(1)
            return output
        # Decodes are rows [0, num_decodes), prefills the rest (reorder_batch made it so).
        ndt, num_reqs = md.num_decode_tokens, nd + md.num_prefills
        for first, last, tokens in ((0, nd, slice(0, ndt)), (nd, num_reqs, slice(ndt, n))):
            if last > first:
                out, _ = attend(
                    q[tokens],
                    md.qo_indptr[first : last + 1],
                    md.paged_kv_indptr[first : last + 1],
                    md.paged_kv_last_page_len[first:last],
                    md.paged_kv_indices,
                )
                output[tokens] = out.flatten(1)
        return output
