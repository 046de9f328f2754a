"""The model runner (vLLM 0.9.0's ``v1/worker/gpu_model_runner.py``, reduced to the attention path).

``ModelRunner(vllm_config, device, attn_backend)`` keeps vLLM's life cycle and names
(``profile_run``, ``get_kv_cache_spec``, ``initialize_kv_cache``, ``execute_model``), with one
metadata builder per KV cache group. Data-dependent shapes come from CPU numpy, so the same code
runs Llama-3.1-8B's shape on ``meta``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from harness.errors import HarnessError
from harness.reference.backends import get_attn_backend
from harness.reference.backends.abstract import (
    AttentionBackend,
    AttentionMetadataBuilder,
    KVCacheAware,
)
from harness.reference.backends.mla.common import MLACommonBackend
from harness.reference.backends.utils import compute_cascade_attn_prefix_len, device_num_sms
from harness.reference.common_metadata import CommonAttentionMetadata
from harness.reference.config import VllmConfig, set_current_vllm_config
from harness.reference.input_batch import CachedRequestState, InputBatch
from harness.reference.kv_cache_interface import (
    AttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheSpec,
    SlidingWindowSpec,
)
from harness.reference.model import LlamaForCausalLM, build_model
from harness.reference.oracle import PAD_SLOT_ID
from harness.reference.outputs import EMPTY_MODEL_RUNNER_OUTPUT, ModelRunnerOutput, SchedulerOutput
from harness.reference.step_trace import GroupTrace, StepTrace


class ModelRunner:
    """Drives the reference model over scheduler outputs with one metadata builder per KV cache group."""

    def __init__(
        self,
        vllm_config: VllmConfig,
        device: torch.device | str = "cpu",
        attn_backend: str | type[AttentionBackend] = "FLASH_ATTN",
        *,
        seed: int = 0,
        cascade_attn_enabled: bool = True,
        num_sms: int | None = None,
    ) -> None:
        self.vllm_config = vllm_config
        self.model_config = vllm_config.model_config
        self.cache_config = vllm_config.cache_config
        self.scheduler_config = vllm_config.scheduler_config
        self.device = torch.device(device)
        self.pin_memory = False
        self.attn_backend_cls = (
            get_attn_backend(attn_backend) if isinstance(attn_backend, str) else attn_backend
        )
        """The backend of every KV cache group: a registry name, or a class (e.g. a regression variant)."""
        if issubclass(self.attn_backend_cls, MLACommonBackend):
            raise HarnessError(
                f"{self.attn_backend_cls.get_name()} is an MLA backend, but the reference Llama model "
                "has no MLA layers (use_mla=False); use FLASH_ATTN or FLASHINFER"
            )
        self.cascade_attn_enabled = cascade_attn_enabled
        self.num_sms = device_num_sms(self.device) if num_sms is None else num_sms
        """SMs the cascade heuristic assumes: the CUDA device's, a simulated device's, or an H100's."""
        self.max_model_len = self.model_config.max_model_len
        self.max_num_tokens = self.scheduler_config.max_num_batched_tokens
        self.max_num_reqs = self.scheduler_config.max_num_seqs
        self.num_query_heads = self.model_config.num_attention_heads

        with set_current_vllm_config(vllm_config):  # as vLLM's load_model
            self.model: LlamaForCausalLM = build_model(self.model_config, self.device, seed)

        self.requests: dict[str, CachedRequestState] = {}
        self.input_batch = self._make_input_batch([self.cache_config.block_size])
        self.kv_cache_config: KVCacheConfig | None = None
        self.attn_backends: list[type[AttentionBackend]] = []
        self.attn_metadata_builders: list[AttentionMetadataBuilder[Any]] = []
        self.kv_caches: dict[str, torch.Tensor] = {}

        # Persistent buffers: device tensors plus their CPU/numpy twins.
        self.input_ids = torch.zeros(self.max_num_tokens, dtype=torch.int32, device=self.device)
        """(max_num_tokens,) token ids of the flattened batch."""
        self.positions = torch.zeros(self.max_num_tokens, dtype=torch.int64, device=self.device)
        """(max_num_tokens,) position of each token in its request."""
        self.query_start_loc = torch.zeros(
            self.max_num_reqs + 1, dtype=torch.int32, device=self.device
        )
        """(max_num_reqs + 1,) start of each request's tokens in the flattened batch."""
        self.seq_lens = torch.zeros(self.max_num_reqs, dtype=torch.int32, device=self.device)
        """(max_num_reqs,) computed + scheduled tokens of each request."""
        self.input_ids_cpu = torch.zeros(self.max_num_tokens, dtype=torch.int32)
        self.input_ids_np: npt.NDArray[np.int32] = self.input_ids_cpu.numpy()
        self.positions_cpu = torch.zeros(self.max_num_tokens, dtype=torch.int64)
        self.positions_np: npt.NDArray[np.int64] = self.positions_cpu.numpy()
        self.query_start_loc_cpu = torch.zeros(self.max_num_reqs + 1, dtype=torch.int32)
        self.query_start_loc_np: npt.NDArray[np.int32] = self.query_start_loc_cpu.numpy()
        self.seq_lens_cpu = torch.zeros(self.max_num_reqs, dtype=torch.int32)
        self.seq_lens_np: npt.NDArray[np.int32] = self.seq_lens_cpu.numpy()
        self.arange_np = np.arange(
            max(self.max_num_reqs + 1, self.max_model_len, self.max_num_tokens), dtype=np.int64
        )

    def _make_input_batch(self, block_sizes: list[int]) -> InputBatch:
        return InputBatch(
            max_num_reqs=self.max_num_reqs,
            max_model_len=self.max_model_len,
            max_num_batched_tokens=self.max_num_tokens,
            device=self.device,
            pin_memory=self.pin_memory,
            block_sizes=block_sizes,
        )

    # What tools may ask of the runner ---------------------------------------------------------

    def get_model(self) -> LlamaForCausalLM:
        """The model (vLLM's ``get_model``), e.g. for the dense oracle's forward."""
        return self.model

    def persistent_device_tensors(self) -> dict[str, list[torch.Tensor]]:
        """The device tensors that exist from construction on, by what they are.

        ``"weights"`` (vLLM's ``load_model``) and ``"runner buffers"`` (input ids, positions,
        ``query_start_loc``, ``seq_lens``, each group's block table and slot mapping):
        vLLM allocates both before profiling. The KV caches are not among them.
        """
        buffers = [self.input_ids, self.positions, self.query_start_loc, self.seq_lens]
        for block_table in self.input_batch.block_table.block_tables:
            buffers += [block_table.get_device_tensor(), block_table.slot_mapping]
        return {
            "weights": [*self.model.parameters(), *self.model.buffers()],
            "runner buffers": buffers,
        }

    def wrap_decoder_layers(self, wrap: Callable[[nn.Module], nn.Module]) -> None:
        """Replace every decoder layer ``layer`` of the model with ``wrap(layer)``.

        The wrapper is called as the layer is and must return what it would (layer replay
        uses this); wrapping again wraps the wrappers.
        """
        layers = self.model.model.layers
        for i, layer in enumerate(layers):
            layers[i] = wrap(layer)

    # KV cache set-up -----------------------------------------------------------------------

    def get_kv_cache_spec(self) -> dict[str, KVCacheSpec]:
        """One spec per attention layer: sliding-window layers get a ``SlidingWindowSpec``."""
        block_size = self.cache_config.block_size
        specs: dict[str, KVCacheSpec] = {}
        for name, layer in self.model.attention_layers().items():
            # block_size, num_kv_heads, head_size, dtype, use_mla
            args = (block_size, layer.num_kv_heads, layer.head_size, self.model_config.dtype, False)
            if layer.sliding_window is not None:
                specs[name] = SlidingWindowSpec(*args, sliding_window=layer.sliding_window)
            else:
                specs[name] = FullAttentionSpec(*args)
        return specs

    def initialize_kv_cache(self, kv_cache_config: KVCacheConfig) -> None:
        """One backend + builder per group, one KV cache tensor per layer, impls on the layers;
        builders that declare ``bind_kv_caches`` (:class:`KVCacheAware`) get their group's caches.
        """
        if self.attn_metadata_builders:
            raise RuntimeError("initialize_kv_cache was already called")
        self.kv_cache_config = kv_cache_config
        block_sizes = [g.kv_cache_spec.block_size for g in kv_cache_config.kv_cache_groups]
        if block_sizes != [bt.block_size for bt in self.input_batch.block_table.block_tables]:
            self.input_batch = self._make_input_batch(block_sizes)  # may_reinitialize_input_batch
        layers = self.model.attention_layers()
        backend = self.attn_backend_cls
        for i, group in enumerate(kv_cache_config.kv_cache_groups):
            spec = group.kv_cache_spec
            if not isinstance(spec, AttentionSpec):
                raise NotImplementedError("only AttentionSpec is supported")
            builder = backend.get_builder_cls()(
                spec, self.input_batch.block_table[i], self.vllm_config, self.device
            )
            self.attn_backends.append(backend)
            self.attn_metadata_builders.append(builder)
            for name in group.layer_names:
                num_blocks = kv_cache_config.tensors[name].size // spec.page_size_bytes
                assert num_blocks >= kv_cache_config.num_blocks
                shape = backend.get_kv_cache_shape(
                    num_blocks, spec.block_size, spec.num_kv_heads, spec.head_size
                )
                self.kv_caches[name] = torch.zeros(shape, dtype=spec.dtype, device=self.device)
                layer = layers[name]
                layer.impl = backend.get_impl_cls()(
                    layer.num_heads,
                    layer.head_size,
                    layer.scale,
                    layer.num_kv_heads,
                    layer.sliding_window,
                )
        for builder, group in zip(
            self.attn_metadata_builders, kv_cache_config.kv_cache_groups, strict=True
        ):
            if isinstance(builder, KVCacheAware):
                builder.bind_kv_caches({name: self.kv_caches[name] for name in group.layer_names})

    # Profiling -----------------------------------------------------------------------------

    @torch.inference_mode()
    def _dummy_run(self, num_tokens: int, skip_attn: bool = True) -> torch.Tensor:
        """Forward ``num_tokens`` dummy tokens split over up to ``max_num_seqs`` requests.

        ``skip_attn`` (profiling): no attention metadata; otherwise fresh prefills whose slots are
        all ``PAD_SLOT_ID``, so nothing is written into the KV cache.
        """
        assert num_tokens <= self.max_num_tokens
        num_reqs = min(self.max_num_reqs, num_tokens)
        num_scheduled_tokens = np.full(num_reqs, num_tokens // num_reqs, dtype=np.int32)
        num_scheduled_tokens[-1] += num_tokens % num_reqs
        attn_metadata: dict[str, object] | None = None
        if not skip_attn:
            if self.kv_cache_config is None:
                raise RuntimeError("_dummy_run(skip_attn=False) needs initialize_kv_cache first")
            for block_table in self.input_batch.block_table.block_tables:
                block_table.slot_mapping_np[:num_tokens] = PAD_SLOT_ID
            common = self._common_attn_metadata(
                num_reqs, num_scheduled_tokens, np.zeros(num_reqs, np.int32)
            )
            attn_metadata = self._build_attn_metadata(common, num_scheduled_tokens, None)
        hidden_states = self.model.forward(
            self.input_ids[:num_tokens], self.positions[:num_tokens], self.kv_caches, attn_metadata
        )
        logit_indices = torch.as_tensor(np.cumsum(num_scheduled_tokens) - 1).to(self.device)
        return hidden_states[logit_indices]

    @torch.inference_mode()
    def _dummy_sampler_run(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.model.compute_logits(hidden_states).argmax(dim=-1)

    def profile_run(self) -> None:
        """vLLM's profiling pass: the largest batch, no attention metadata, then the sampler."""
        hidden_states = self._dummy_run(self.max_num_tokens)
        self._dummy_sampler_run(hidden_states)

    # One step ------------------------------------------------------------------------------

    def _update_states(self, scheduler_output: SchedulerOutput) -> None:
        """Bring the persistent batch in line with ``scheduler_output`` (vLLM's order of steps)."""
        batch = self.input_batch
        removed_req_indices: list[int] = []
        for req_id in scheduler_output.finished_req_ids:
            self.requests.pop(req_id, None)
            req_index = batch.remove_request(req_id)
            if req_index is not None:
                removed_req_indices.append(req_index)
        # Requests not scheduled this step (preempted or skipped) leave the batch but keep state.
        for req_id in batch.req_id_to_index.keys() - scheduler_output.num_scheduled_tokens.keys():
            req_index = batch.remove_request(req_id)
            assert req_index is not None
            removed_req_indices.append(req_index)

        req_ids_to_add: list[str] = []
        for new_req in scheduler_output.scheduled_new_reqs:
            self.requests[new_req.req_id] = CachedRequestState(
                req_id=new_req.req_id,
                prompt_token_ids=list(new_req.prompt_token_ids),
                block_ids=[list(ids) for ids in new_req.block_ids],
                num_computed_tokens=new_req.num_computed_tokens,
            )
            req_ids_to_add.append(new_req.req_id)
        for req_data in scheduler_output.scheduled_cached_reqs:
            req_state = self.requests[req_data.req_id]
            req_state.num_computed_tokens = req_data.num_computed_tokens
            # As vLLM 0.9.0: new_token_ids are the scheduled tokens; any the runner has not
            # sampled itself (none in one process) join the outputs.
            num_new_tokens = (
                req_data.num_computed_tokens + len(req_data.new_token_ids) - req_state.num_tokens
            )
            if num_new_tokens > 0:
                req_state.output_token_ids.extend(req_data.new_token_ids[-num_new_tokens:])
            if req_data.resumed_from_preemption:
                req_state.block_ids = [list(ids) for ids in req_data.new_block_ids]
            else:
                for block_ids, new_ids in zip(
                    req_state.block_ids, req_data.new_block_ids, strict=True
                ):
                    block_ids.extend(new_ids)
            req_index = batch.req_id_to_index.get(req_data.req_id)
            if req_index is None:
                req_ids_to_add.append(req_data.req_id)
                continue
            batch.num_computed_tokens_cpu[req_index] = req_data.num_computed_tokens
            batch.block_table.append_row(req_data.new_block_ids, req_index)
            start = req_data.num_computed_tokens
            batch.token_ids_cpu[req_index, start : start + len(req_data.new_token_ids)] = (
                req_data.new_token_ids
            )

        removed_req_indices.sort(reverse=True)
        for req_id in req_ids_to_add:
            batch.add_request(
                self.requests[req_id], removed_req_indices.pop() if removed_req_indices else None
            )
        if removed_req_indices:
            batch.condense(removed_req_indices)
        self._may_reorder_batch(scheduler_output)

    def _may_reorder_batch(self, scheduler_output: SchedulerOutput) -> bool:
        """Group 0's builder may reorder the batch; the others must not (one order for all groups)."""
        if not self.attn_metadata_builders:
            return False
        reordered = self.attn_metadata_builders[0].reorder_batch(self.input_batch, scheduler_output)
        for i, builder in enumerate(self.attn_metadata_builders[1:], start=1):
            if builder.reorder_batch(self.input_batch, scheduler_output):
                raise AssertionError(
                    f"KV cache group {i}'s builder {type(builder).__name__} reordered the batch; "
                    "only group 0 may (all groups must agree on one request order)"
                )
        return reordered

    def _common_attn_metadata(
        self,
        num_reqs: int,
        num_scheduled_tokens: npt.NDArray[np.int32],
        num_computed_tokens: npt.NDArray[np.int32],
    ) -> CommonAttentionMetadata:
        """Fill query_start_loc / seq_lens (CPU, then device) and wrap them.

        As vLLM 0.9.0, the device tails past the batch hold -1 (``query_start_loc``) and 0
        (``seq_lens``); the CPU tails keep stale values.
        """
        total = int(num_scheduled_tokens.sum())
        self.query_start_loc_np[0] = 0
        np.cumsum(num_scheduled_tokens, out=self.query_start_loc_np[1 : num_reqs + 1])
        self.seq_lens_np[:num_reqs] = num_computed_tokens + num_scheduled_tokens
        self.query_start_loc[: num_reqs + 1].copy_(
            self.query_start_loc_cpu[: num_reqs + 1], non_blocking=True
        )
        self.seq_lens[:num_reqs].copy_(self.seq_lens_cpu[:num_reqs], non_blocking=True)
        self.seq_lens[num_reqs:].fill_(0)
        self.query_start_loc[num_reqs + 1 :].fill_(-1)
        return CommonAttentionMetadata(
            query_start_loc=self.query_start_loc[: num_reqs + 1],
            query_start_loc_cpu=self.query_start_loc_cpu[: num_reqs + 1],
            seq_lens=self.seq_lens[:num_reqs],
            seq_lens_cpu=self.seq_lens_cpu[:num_reqs],
            num_computed_tokens_cpu=torch.as_tensor(num_computed_tokens.astype(np.int32)),
            num_reqs=num_reqs,
            num_actual_tokens=total,
            max_query_len=int(num_scheduled_tokens.max()) if num_reqs else 0,
        )

    def _build_attn_metadata(
        self,
        common_attn_metadata: CommonAttentionMetadata,
        num_scheduled_tokens: npt.NDArray[np.int32],
        num_common_prefix_blocks: list[int] | None,
    ) -> dict[str, object]:
        """Each group's metadata built once; every layer of the group maps to that one object."""
        assert self.kv_cache_config is not None
        attn_metadata: dict[str, object] = {}
        num_computed = common_attn_metadata.num_computed_tokens_cpu.numpy()
        for i, group in enumerate(self.kv_cache_config.kv_cache_groups):
            builder = self.attn_metadata_builders[i]
            common_prefix_len = 0
            if self.cascade_attn_enabled and num_common_prefix_blocks:
                common_prefix_len = compute_cascade_attn_prefix_len(
                    builder,
                    num_scheduled_tokens,
                    num_computed,
                    num_common_prefix_blocks[i],
                    self.num_query_heads,
                    self.num_sms,
                )
            metadata = builder.build(
                common_prefix_len=common_prefix_len, common_attn_metadata=common_attn_metadata
            )
            for layer_name in group.layer_names:
                attn_metadata[layer_name] = metadata
        return attn_metadata

    def _prepare_inputs(
        self, scheduler_output: SchedulerOutput
    ) -> tuple[dict[str, object], npt.NDArray[np.int64]]:
        """Token ids, positions, slot mappings and per-layer metadata; returns logits indices."""
        batch = self.input_batch
        num_reqs = batch.num_reqs
        total = scheduler_output.total_num_scheduled_tokens
        batch.block_table.commit(num_reqs)
        num_scheduled_tokens = np.fromiter(
            (scheduler_output.num_scheduled_tokens[r] for r in batch.req_ids), np.int32, num_reqs
        )
        # E.g. [2, 5, 3] -> req_indices [0,0,1,1,1,1,1,2,2,2], arange [0,1,0,1,2,3,4,0,1,2].
        req_indices = np.repeat(self.arange_np[:num_reqs], num_scheduled_tokens)
        cu_num_tokens = np.cumsum(num_scheduled_tokens)
        arange = self.arange_np[:total] - np.repeat(
            cu_num_tokens - num_scheduled_tokens, num_scheduled_tokens
        )
        positions_np = self.positions_np[:total]
        np.add(batch.num_computed_tokens_cpu[req_indices], arange, out=positions_np)
        token_indices = positions_np + req_indices * batch.max_model_len
        self.input_ids_np[:total] = batch.token_ids_cpu.ravel()[token_indices]
        # CPU only: the FlashAttention builder copies its group's slots to the device (vLLM 0.9.0).
        batch.block_table.compute_slot_mapping(req_indices, positions_np)
        self.input_ids[:total].copy_(self.input_ids_cpu[:total], non_blocking=True)
        self.positions[:total].copy_(self.positions_cpu[:total], non_blocking=True)

        common = self._common_attn_metadata(
            num_reqs, num_scheduled_tokens, batch.num_computed_tokens_cpu[:num_reqs]
        )
        attn_metadata = self._build_attn_metadata(
            common, num_scheduled_tokens, scheduler_output.num_common_prefix_blocks
        )
        return attn_metadata, (cu_num_tokens - 1).astype(np.int64)

    @torch.inference_mode()
    def execute_model(
        self, scheduler_output: SchedulerOutput, *, run_model: bool = True, trace: bool = False
    ) -> ModelRunnerOutput:
        """One step. ``run_model=False`` builds all metadata but skips the forward (samples are
        0); ``trace=True`` attaches a :class:`StepTrace` (``None`` when nothing was scheduled)."""
        if self.kv_cache_config is None:
            raise RuntimeError("execute_model needs initialize_kv_cache first")
        self._update_states(scheduler_output)
        if scheduler_output.total_num_scheduled_tokens == 0:
            return EMPTY_MODEL_RUNNER_OUTPUT
        attn_metadata, logits_indices = self._prepare_inputs(scheduler_output)
        batch = self.input_batch
        num_reqs = batch.num_reqs
        total = scheduler_output.total_num_scheduled_tokens
        sampled = np.zeros(num_reqs, dtype=np.int64)
        hidden_states: torch.Tensor | None = None
        if run_model:
            hidden_states = self.model.forward(
                self.input_ids[:total], self.positions[:total], self.kv_caches, attn_metadata
            )
            logits = self.model.compute_logits(
                hidden_states[torch.as_tensor(logits_indices).to(self.device)]
            )
            token_ids = logits.argmax(dim=-1)
            if not token_ids.is_meta:  # on meta there is no data: every sample is token 0
                sampled = token_ids.cpu().numpy()
        step_trace = self._trace(scheduler_output, attn_metadata, hidden_states) if trace else None

        # A request still in (chunked) prefill discards its sample.
        seq_lens = self.seq_lens_np[:num_reqs]
        valid = seq_lens >= batch.num_tokens[:num_reqs]
        rows = np.flatnonzero(valid)
        batch.token_ids_cpu[rows, batch.num_tokens[rows]] = sampled[rows]
        batch.num_tokens[rows] += 1
        req_ids = list(batch.req_ids)
        sampled_token_ids: list[list[int]] = [[] for _ in range(num_reqs)]
        for row in map(int, rows):
            token = int(sampled[row])
            sampled_token_ids[row].append(token)
            self.requests[req_ids[row]].output_token_ids.append(token)
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index=dict(batch.req_id_to_index),
            sampled_token_ids=sampled_token_ids,
            trace=step_trace,
        )

    def _trace(
        self,
        scheduler_output: SchedulerOutput,
        attn_metadata: dict[str, object],
        hidden_states: torch.Tensor | None,
    ) -> StepTrace:
        """Copy out what the step did (called before sampling appends to the batch)."""
        assert self.kv_cache_config is not None
        batch = self.input_batch
        num_reqs = batch.num_reqs
        total = scheduler_output.total_num_scheduled_tokens
        computed = batch.num_computed_tokens_cpu[:num_reqs].tolist()
        scheduled = [scheduler_output.num_scheduled_tokens[r] for r in batch.req_ids]
        groups: list[GroupTrace] = []
        for g, group in enumerate(self.kv_cache_config.kv_cache_groups):
            table = batch.block_table[g]
            groups.append(
                GroupTrace(
                    group_id=g,
                    kv_cache_spec=group.kv_cache_spec,
                    layer_names=list(group.layer_names),
                    block_table=[
                        table.block_table_np[i, : table.num_blocks_per_row[i]].tolist()
                        for i in range(num_reqs)
                    ],
                    slot_mapping=table.slot_mapping_np[:total].tolist(),
                    metadata=attn_metadata[group.layer_names[0]],
                )
            )
        return StepTrace(
            req_ids=list(batch.req_ids),
            num_computed_tokens=computed,
            num_scheduled_tokens=scheduled,
            query_start_loc=self.query_start_loc_np[: num_reqs + 1].tolist(),
            input_ids=self.input_ids_np[:total].tolist(),
            positions=self.positions_np[:total].tolist(),
            token_ids=[
                np.array(batch.token_ids_cpu[i, : computed[i] + scheduled[i]], dtype=np.int32)
                for i in range(num_reqs)
            ],
            groups=groups,
            attn_metadata=dict(attn_metadata),
            hidden_states=hidden_states,
        )
