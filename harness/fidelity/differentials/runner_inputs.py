"""The runner's input preparation: positions, token ids, slot mapping and the persistent buffers.

vLLM's side runs ``GPUModelRunner._prepare_inputs`` on a stub runner whose buffers come from
``GPUModelRunner.__init__``'s own statements; the reference's side is a real ``ModelRunner`` (tiny
model, FlashAttention) run with ``execute_model(run_model=False)``. Compared after the step: each
token's position, token id and slot, and the whole device buffers, dtypes included.
"""

from __future__ import annotations

import dataclasses
import types
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from harness.fidelity.deviation import Deviation
from harness.fidelity.differential import Differential, modules
from harness.fidelity.differentials.batch import (
    BatchCase,
    generate_batch,
    max_blocks_per_req,
    show_batch,
    shrink_batch,
    vllm_model_config,
)
from harness.fidelity.vllm import VllmCode
from harness.reference.config import CacheConfig, SchedulerConfig, VllmConfig, get_model_config
from harness.reference.kv_cache_utils import get_kv_cache_config
from harness.reference.outputs import NewRequestData, SchedulerOutput
from harness.reference.runner import ModelRunner
from harness.vllm_tree.extract import exec_attribute_assignments
from harness.vllm_tree.tree import Location, VllmTree

VOCAB_SIZE = get_model_config("tiny").vocab_size
BUFFERS = (
    "input_ids",
    "positions",
    "query_start_loc",
    "seq_lens",
    "arange_np",
    "input_ids_cpu",
    "positions_cpu",
    "positions_np",
    "query_start_loc_cpu",
    "query_start_loc_np",
    "seq_lens_cpu",
    "seq_lens_np",
)
"""The persistent buffers of ``GPUModelRunner.__init__`` that ``_prepare_inputs`` uses."""


def token_id(req: int, position: int) -> int:
    """The prompt token at ``position`` of request ``req`` (any deterministic values do)."""
    return (req * 131 + position * 17 + 5) % VOCAB_SIZE


def generate_runner_inputs(rng: np.random.Generator) -> BatchCase:
    return generate_batch(rng, block_sizes=(16, 32), head_sizes=(64,), prefix=False)


def _view(num_tokens: int, num_reqs: int, buffers: Any, block_table: Any) -> dict[str, object]:
    return {
        "slot_mapping_cpu": block_table.slot_mapping_np[:num_tokens].copy(),
        "positions_cpu": buffers.positions_np[:num_tokens].copy(),
        "query_start_loc_cpu": buffers.query_start_loc_cpu[: num_reqs + 1].clone(),
        "seq_lens_cpu": buffers.seq_lens_cpu[:num_reqs].clone(),
        "input_ids": buffers.input_ids[:num_tokens].clone(),
        "input_ids_dtype": buffers.input_ids.dtype,
        "positions": buffers.positions[:num_tokens].clone(),
        "query_start_loc": buffers.query_start_loc.clone(),
        "seq_lens": buffers.seq_lens.clone(),
        "block_table": block_table.get_device_tensor()[:num_reqs].clone(),
        "slot_mapping": block_table.slot_mapping.clone(),
    }


def runner_inputs_vllm(vllm: VllmCode, case: BatchCase) -> object:
    runner_module = vllm.module("v1.worker.gpu_model_runner")
    path = vllm.tree.module_file("vllm.v1.worker.gpu_model_runner")
    n = len(case.reqs)
    runner = SimpleNamespace(
        max_num_tokens=case.max_num_batched_tokens,
        max_num_reqs=case.max_num_reqs,
        max_model_len=case.max_model_len,
        device=torch.device("cpu"),
        pin_memory=False,
    )
    namespace = {"torch": torch, "np": np, "self": runner}
    exec_attribute_assignments(path, "GPUModelRunner", "__init__", BUFFERS, namespace)
    block_tables = vllm.module("v1.worker.block_table").MultiGroupBlockTable(
        case.max_num_reqs,
        case.max_model_len,
        case.max_num_batched_tokens,
        False,
        torch.device("cpu"),
        case.block_size,
    )
    token_ids = torch.zeros((case.max_num_reqs, case.max_model_len), dtype=torch.int32)
    num_computed = np.zeros(case.max_num_reqs, dtype=np.int32)
    for i, r in enumerate(case.reqs):
        block_tables.add_row([list(r.block_ids)], i)
        token_ids[i, : r.seq_len] = torch.tensor([token_id(i, p) for p in range(r.seq_len)])
        num_computed[i] = r.computed
    runner.input_batch = SimpleNamespace(
        num_reqs=n,
        req_ids=[f"r{i}" for i in range(n)],
        block_table=block_tables,
        num_computed_tokens_cpu=num_computed,
        token_ids_cpu_tensor=token_ids,
        token_ids_cpu=token_ids.numpy(),
    )
    spec = vllm.module("v1.kv_cache_interface").FullAttentionSpec(
        case.block_size, case.num_kv_heads, case.head_size, torch.float32, False
    )
    runner.kv_cache_config = SimpleNamespace(
        kv_cache_groups=[SimpleNamespace(kv_cache_spec=spec, layer_names=["layer.0"])]
    )
    runner.num_query_heads, runner.attention_chunk_size = case.num_heads, None
    runner.model_config = vllm_model_config(case.num_heads, case.num_kv_heads, case.head_size)
    runner.parallel_config = None
    runner.vllm_config = SimpleNamespace(compilation_config=SimpleNamespace(full_cuda_graph=False))
    flash_attn = vllm.module("v1.attention.backends.flash_attn")
    runner.attn_metadata_builders = [
        flash_attn.FlashAttentionMetadataBuilder(runner, spec, block_tables[0])
    ]
    runner.cascade_attn_enabled, runner.use_alibi, runner.num_sms = True, False, 132
    runner._compute_cascade_attn_prefix_len = types.MethodType(
        runner_module.GPUModelRunner._compute_cascade_attn_prefix_len, runner
    )
    runner.uses_mrope, runner.lora_config = False, None
    scheduler_output = SimpleNamespace(
        total_num_scheduled_tokens=case.num_tokens,
        num_scheduled_tokens={f"r{i}": r.scheduled for i, r in enumerate(case.reqs)},
        num_common_prefix_blocks=[0],
        scheduled_spec_decode_tokens={},
    )
    runner_module.GPUModelRunner._prepare_inputs(runner, scheduler_output)
    return _view(case.num_tokens, n, runner, block_tables[0])


def runner_inputs_reference(case: BatchCase) -> object:
    model = dataclasses.replace(get_model_config("tiny"), max_model_len=case.max_model_len)
    config = VllmConfig(
        model_config=model,
        cache_config=CacheConfig(block_size=case.block_size),
        scheduler_config=SchedulerConfig(
            max_num_seqs=case.max_num_reqs,
            max_num_batched_tokens=case.max_num_batched_tokens,
            max_model_len=case.max_model_len,
        ),
    )
    runner = ModelRunner(config, "cpu", "FLASH_ATTN")
    spec = runner.get_kv_cache_spec()
    page = next(iter(spec.values())).page_size_bytes
    num_blocks = max(b for r in case.reqs for b in r.block_ids) + 1  # every block id exists
    runner.initialize_kv_cache(get_kv_cache_config(config, spec, num_blocks * page * len(spec)))
    assert runner.input_batch.block_table[0].max_num_blocks_per_req == max_blocks_per_req(case)
    new_reqs = [
        NewRequestData(
            f"r{i}",
            [token_id(i, p) for p in range(r.seq_len)],
            [list(r.block_ids)],
            num_computed_tokens=r.computed,
        )
        for i, r in enumerate(case.reqs)
    ]
    runner.execute_model(
        SchedulerOutput(
            scheduled_new_reqs=new_reqs,
            scheduled_cached_reqs=[],
            num_scheduled_tokens={r.req_id: case.reqs[i].scheduled for i, r in enumerate(new_reqs)},
            total_num_scheduled_tokens=case.num_tokens,
            num_common_prefix_blocks=[0],
        ),
        run_model=False,
    )
    return _view(case.num_tokens, len(case.reqs), runner, runner.input_batch.block_table[0])


def _prepare_inputs_replaced(tree: VllmTree) -> Location | None:
    """vLLM 0.34.0's ``GPUModelRunner`` (the model runner V2) has no ``_prepare_inputs``."""
    module = tree.module_defining("GPUModelRunner")
    if module is None or tree.find(module, "GPUModelRunner._prepare_inputs") is not None:
        return None
    return tree.location(module, "GPUModelRunner.prepare_inputs") or tree.location(
        module, "GPUModelRunner"
    )


PREPARE_INPUTS_REPLACED = Deviation(
    "prepare-inputs-replaced",
    "replaced GPUModelRunner._prepare_inputs and its persistent batch with the model runner V2's "
    "prepare_inputs, which sorts each batch decode-first and computes positions, sequence "
    "lengths and slot mappings with Triton kernels over request-state indices",
    _prepare_inputs_replaced,
    paths=None,
)


RUNNER_INPUTS: Differential[BatchCase] = Differential(
    name="runner-inputs",
    description="positions, token ids and slot mapping of a step, and the runner's device "
    "buffers afterwards (dtypes, -1 / 0 tails, block table, slot-mapping buffer)",
    vllm_code="vllm/v1/worker/gpu_model_runner.py GPUModelRunner._prepare_inputs (buffers from "
    "GPUModelRunner.__init__)",
    vllm_modules=modules(  # vLLM 0.9.x: only a tree with this runner is compared
        "vllm.v1.kv_cache_interface",
        "vllm.v1.worker.block_table",
        "vllm.v1.attention.backends.utils",
        "vllm.v1.attention.backends.flash_attn",
        "vllm.v1.worker.gpu_model_runner",
    ),
    generate=generate_runner_inputs,
    run_vllm=runner_inputs_vllm,
    run_reference=runner_inputs_reference,
    shrink=shrink_batch,
    show=show_batch,
    trials=200,
    deviations=(PREPARE_INPUTS_REPLACED,),
)
