"""The model runner: slot mappings, per-group metadata, batch reordering, profiling, and paged
attention through the built metadata against a dense forward, end to end on CPU and on ``meta``."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from harness.errors import HarnessError
from harness.reference.backends import get_attn_backend
from harness.reference.backends.abstract import (
    AttentionBackend,
    InputBatchLike,
    SchedulerOutputLike,
)
from harness.reference.backends.flash_attn import (
    FlashAttentionBackend,
    FlashAttentionMetadata,
    FlashAttentionMetadataBuilder,
)
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.reference.backends.utils import reorder_batch_to_split_decodes_and_prefills
from harness.reference.common_metadata import CommonAttentionMetadata
from harness.reference.config import CacheConfig, SchedulerConfig, VllmConfig, get_model_config
from harness.reference.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec
from harness.reference.kv_cache_utils import get_kv_cache_config, kv_cache_config_for_num_blocks
from harness.reference.outputs import NewRequestData, SchedulerOutput
from harness.reference.runner import ModelRunner
from harness.reference.scenarios import (
    Scenario,
    dense_check,
    get_scenario,
    oracle_tolerance,
    scenario_engine,
)
from harness.reference.scheduler import Request, Scheduler
from harness.reference.step_trace import StepTrace

TINY = get_model_config("tiny")


def build_runner(
    scenario: Scenario, attn_backend: str | type[AttentionBackend] | None = None
) -> ModelRunner:
    """The scenario engine's runner, for tests that drive it by hand."""
    return scenario_engine(scenario, attn_backend).runner


HYBRID = get_model_config("tiny-hybrid")
SLIDING = dataclasses.replace(
    TINY, name="tiny-sliding", sliding_window=5, layer_types=("sliding_attention",) * 2
)
MODELS = {"full": TINY, "sliding": SLIDING, "hybrid": HYBRID}


def _scenario(model: str = "full", backend: str = "FLASH_ATTN", **kw: Any) -> Scenario:
    """``model="hybrid"`` asks for the hybrid KV cache manager (two groups) unless told otherwise."""
    config = dataclasses.replace(MODELS[model], max_model_len=64)
    kw.setdefault("disable_hybrid_kv_cache_manager", model != "hybrid")
    return Scenario(name="test", description="", model_config=config, backend=backend, **kw)


def _execute(runner: ModelRunner, so: SchedulerOutput) -> StepTrace:
    trace = runner.execute_model(so, trace=True).trace
    assert trace is not None
    return trace


def _drive(
    runner: ModelRunner, scheduler: Scheduler, max_steps: int = 200
) -> list[tuple[float, float]]:
    """(max |paged - dense|, the oracle's tolerance) of every step until all requests finish."""
    errors: list[tuple[float, float]] = []
    for _ in range(max_steps):
        if not scheduler.has_unfinished_requests():
            return errors
        so = scheduler.schedule()
        out = runner.execute_model(so, trace=True)
        assert out.trace is not None
        errors.append((dense_check(runner.get_model(), out.trace), oracle_tolerance(out.trace)))
        scheduler.update_from_output(so, out)
    raise AssertionError("requests did not finish")


def _add_random_requests(scheduler: Scheduler, seed: int, n: int, vocab: int) -> None:
    rng = np.random.default_rng(seed)
    for i in range(n):
        prompt = rng.integers(0, vocab, int(rng.integers(1, 21))).tolist()
        scheduler.add_request(Request(f"r{i}", prompt, int(rng.integers(1, 9))))


# The slot-mapping vector through the runner path -------------------------------------------


def test_slot_mapping_vector_through_runner() -> None:
    # block_size 16, 3 blocks per request (max_model_len 48); rows [[7,3],[5]], computed [14,0],
    # scheduled [6,3] -> slots [7*16+14, 7*16+15, 3*16+0..3, 5*16+0..2].
    runner = build_runner(
        dataclasses.replace(
            _scenario(), model_config=dataclasses.replace(TINY, max_model_len=48), num_gpu_blocks=8
        )
    )
    so = SchedulerOutput(
        scheduled_new_reqs=[
            NewRequestData("a", list(range(1, 21)), [[7, 3]], num_computed_tokens=14),
            NewRequestData("b", [9, 8, 7], [[5]], num_computed_tokens=0),
        ],
        scheduled_cached_reqs=[],
        num_scheduled_tokens={"a": 6, "b": 3},
        total_num_scheduled_tokens=9,
        num_common_prefix_blocks=[0],
    )
    trace = _execute(runner, so)
    (group,) = trace.groups
    assert group.block_table == [[7, 3], [5]]
    expected = [126, 127, 48, 49, 50, 51, 80, 81, 82]
    assert group.slot_mapping == expected
    md = trace.attn_metadata["model.layers.0.self_attn.attn"]
    assert isinstance(md, FlashAttentionMetadata) and md is group.metadata
    assert md.slot_mapping.tolist() == expected
    assert md.seq_lens.tolist() == [20, 3]
    assert md.query_start_loc.tolist() == trace.query_start_loc == [0, 6, 9]
    assert trace.positions == [14, 15, 16, 17, 18, 19, 0, 1, 2]
    assert trace.input_ids == [15, 16, 17, 18, 19, 20, 9, 8, 7]
    assert [t.tolist() for t in trace.token_ids] == [list(range(1, 21)), [9, 8, 7]]
    # vLLM 0.9.0's buffers: int32 token ids; device tails -1 (query_start_loc) and 0 (seq_lens).
    assert runner.input_ids.dtype == torch.int32
    assert (runner.query_start_loc[3:] == -1).all() and (runner.seq_lens[2:] == 0).all()


# Paged attention through the built metadata == dense forward ---------------------------------


@pytest.mark.parametrize(
    ("model", "backend", "hybrid_manager"),
    [
        ("full", "FLASH_ATTN", False),
        ("full", "FLASHINFER", False),
        ("sliding", "FLASH_ATTN", False),
        ("sliding", "FLASHINFER", False),
        ("hybrid", "FLASH_ATTN", True),  # two groups (vLLM 0.9.1+)
        ("hybrid", "FLASH_ATTN", False),  # one unified group (vLLM 0.9.0)
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_paged_equals_dense_end_to_end(
    model: str, backend: str, hybrid_manager: bool, seed: int
) -> None:
    # Random prompts (1-20 tokens) and outputs (1-8), a 4-request / 24-token budget (chunked
    # prefills next to decodes) and 8 blocks of 16 (preemptions). Every step's hidden states
    # must equal a dense forward of each whole sequence (ORACLE_TOLERANCE).
    scenario = _scenario(
        model,
        backend,
        max_num_seqs=4,
        max_num_batched_tokens=24,
        num_gpu_blocks=8,
        seed=seed,
        disable_hybrid_kv_cache_manager=not hybrid_manager,
    )
    runner = build_runner(scenario)
    assert runner.kv_cache_config is not None
    assert len(runner.kv_cache_config.kv_cache_groups) == (2 if hybrid_manager else 1)
    scheduler = Scheduler(scenario.vllm_config.scheduler_config, runner.kv_cache_config)
    _add_random_requests(scheduler, seed, n=7, vocab=TINY.vocab_size)
    errors = _drive(runner, scheduler)
    assert all(err <= tolerance for err, tolerance in errors), errors


class _ShiftedSlotsBuilder(FlashAttentionMetadataBuilder):
    """A broken builder: every token is cached one slot too far."""

    def build(
        self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata
    ) -> FlashAttentionMetadata:
        md = super().build(common_prefix_len, common_attn_metadata)
        return dataclasses.replace(md, slot_mapping=md.slot_mapping + 1)


class _ShiftedSlotsBackend(FlashAttentionBackend):
    @staticmethod
    def get_builder_cls() -> type[FlashAttentionMetadataBuilder]:
        return _ShiftedSlotsBuilder


def test_dense_oracle_catches_a_broken_builder() -> None:
    runner = build_runner(_scenario(), attn_backend=_ShiftedSlotsBackend)
    assert runner.kv_cache_config is not None
    scheduler = Scheduler(_scenario().vllm_config.scheduler_config, runner.kv_cache_config)
    _add_random_requests(scheduler, 0, n=3, vocab=TINY.vocab_size)
    assert max(err / tolerance for err, tolerance in _drive(runner, scheduler)) > 100


# One metadata object per group, built once; only group 0 reorders ------------------------------


class _CountingBuilder(FlashAttentionMetadataBuilder):
    builds: ClassVar[list[int]] = []

    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata) -> Any:
        type(self).builds.append(id(self))
        return super().build(common_prefix_len, common_attn_metadata)


class _CountingBackend(FlashAttentionBackend):
    @staticmethod
    def get_builder_cls() -> type[FlashAttentionMetadataBuilder]:
        return _CountingBuilder


def test_every_layer_of_a_group_shares_one_metadata_object() -> None:
    _CountingBuilder.builds = []
    scenario = _scenario("hybrid", num_gpu_blocks=32)
    runner = build_runner(scenario, attn_backend=_CountingBackend)
    assert runner.kv_cache_config is not None
    groups = runner.kv_cache_config.kv_cache_groups
    assert [type(g.kv_cache_spec) for g in groups] == [FullAttentionSpec, SlidingWindowSpec]
    scheduler = Scheduler(scenario.vllm_config.scheduler_config, runner.kv_cache_config)
    _add_random_requests(scheduler, 3, n=3, vocab=TINY.vocab_size)
    so = scheduler.schedule()
    trace = _execute(runner, so)
    per_group = [{id(trace.attn_metadata[name]) for name in g.layer_names} for g in groups]
    assert all(len(ids) == 1 for ids in per_group)
    assert per_group[0] != per_group[1]
    assert sorted(trace.attn_metadata) == sorted(n for g in groups for n in g.layer_names)
    assert [{id(g.metadata)} for g in trace.groups] == per_group
    # One build per group per step, by that group's own builder.
    assert _CountingBuilder.builds == [id(b) for b in runner.attn_metadata_builders]


def test_builders_get_their_groups_spec_and_block_table() -> None:
    runner = build_runner(_scenario("hybrid", num_gpu_blocks=32))
    assert runner.kv_cache_config is not None
    for i, builder in enumerate(runner.attn_metadata_builders):
        assert builder.kv_cache_spec == runner.kv_cache_config.kv_cache_groups[i].kv_cache_spec
        assert builder.block_table is runner.input_batch.block_table[i]
        assert builder.vllm_config is runner.vllm_config


class _DecodeFirstBuilder(FlashAttentionMetadataBuilder):
    """Reorders decode-first, as FlashInfer and MLA do (FlashInfer cannot run the hybrid model)."""

    def reorder_batch(
        self, input_batch: InputBatchLike, scheduler_output: SchedulerOutputLike
    ) -> bool:
        return reorder_batch_to_split_decodes_and_prefills(input_batch, scheduler_output)


class _DecodeFirstBackend(FlashAttentionBackend):
    @staticmethod
    def get_builder_cls() -> type[FlashAttentionMetadataBuilder]:
        return _DecodeFirstBuilder


class _PrefillFirstBuilder(FlashAttentionMetadataBuilder):
    """Wants prefills first: the opposite of group 0's decode-first order."""

    def reorder_batch(
        self, input_batch: InputBatchLike, scheduler_output: SchedulerOutputLike
    ) -> bool:
        ids = list(input_batch.req_ids)
        first_decode = next(
            (i for i, r in enumerate(ids) if scheduler_output.num_scheduled_tokens[r] == 1), None
        )
        last_prefill = max(
            (i for i, r in enumerate(ids) if scheduler_output.num_scheduled_tokens[r] > 1),
            default=None,
        )
        if first_decode is None or last_prefill is None or first_decode > last_prefill:
            return False
        input_batch.swap_states(first_decode, last_prefill)
        return True


def test_only_group_0_may_reorder_the_batch() -> None:
    # Group 0 (same class) reorders prefill-first fine; group 1 then finds nothing to do. To make
    # group 1 disagree, give group 0 the decode-first builder and group 1 the prefill-first one.
    scenario = _scenario("hybrid", num_gpu_blocks=32)
    runner = build_runner(scenario, attn_backend=_DecodeFirstBackend)
    runner.attn_metadata_builders[1] = _PrefillFirstBuilder(
        runner.attn_metadata_builders[1].kv_cache_spec,
        runner.input_batch.block_table[1],
        runner.vllm_config,
        "cpu",
    )
    assert runner.kv_cache_config is not None
    scheduler = Scheduler(scenario.vllm_config.scheduler_config, runner.kv_cache_config)
    scheduler.add_request(Request("a", [1, 2, 3], 3))
    so = scheduler.schedule()
    scheduler.update_from_output(so, runner.execute_model(so))
    scheduler.add_request(Request("b", [4, 5, 6, 7], 3))
    so = scheduler.schedule()  # a decodes, b prefills: decode-first is [a, b]
    with pytest.raises(AssertionError, match="group 1's builder _PrefillFirstBuilder reordered"):
        runner.execute_model(so)


def test_group_0_reorders_decode_first_for_every_group() -> None:
    scenario = _scenario("hybrid", num_gpu_blocks=32)
    runner = build_runner(scenario, attn_backend=_DecodeFirstBackend)
    assert runner.kv_cache_config is not None
    assert len(runner.kv_cache_config.kv_cache_groups) == 2
    scheduler = Scheduler(scenario.vllm_config.scheduler_config, runner.kv_cache_config)
    scheduler.add_request(Request("a", [1, 2, 3, 4, 5], 4))
    scheduler.add_request(Request("b", [6, 7], 4))
    so = scheduler.schedule()
    scheduler.update_from_output(so, runner.execute_model(so))
    runner_rows = {r: runner.input_batch.req_id_to_index[r] for r in ("a", "b")}
    scheduler.add_request(Request("c", [8, 9, 10], 2))
    scheduler.requests["a"].max_tokens = 1  # a finishes now: its hole is refilled by c
    so = scheduler.schedule()
    scheduler.update_from_output(so, runner.execute_model(so))
    assert runner_rows == {"a": 0, "b": 1}
    so = scheduler.schedule()  # b decodes, c prefills (its prompt is done: it decodes too)
    trace = _execute(runner, so)
    assert dense_check(runner.get_model(), trace) <= oracle_tolerance(trace)
    assert trace.num_scheduled_tokens == sorted(trace.num_scheduled_tokens)


# The cascade heuristic uses the device's SM count -------------------------------------------------


@pytest.mark.parametrize(("num_sms", "cascade_on_decode"), [(None, False), (8, True)])
def test_cascade_decision_uses_the_runner_sm_count(
    num_sms: int | None, cascade_on_decode: bool
) -> None:
    # 8 decodes over a 256-token prefix, 4 query heads on 2 KV heads: FlashDecoding needs
    # cdiv(8 * 2 * 2, num_sms) waves, cascade 2. An H100's 132 SMs (the default) favour
    # FlashDecoding; 8 SMs favour cascade.
    scenario = get_scenario("cascade-common-prefix")
    runner = ModelRunner(scenario.vllm_config, "cpu", "FLASH_ATTN", num_sms=num_sms)
    assert runner.num_sms == (num_sms or 132)
    spec = runner.get_kv_cache_spec()
    runner.initialize_kv_cache(
        kv_cache_config_for_num_blocks(runner.vllm_config, spec, scenario.num_gpu_blocks)
    )
    assert scenario.script is not None
    steps = scenario.script(np.random.default_rng(0), TINY.vocab_size)
    traces = [runner.execute_model(so, run_model=False, trace=True).trace for so in steps]
    assert traces[-1] is not None
    md = traces[-1].attn_metadata["model.layers.0.self_attn.attn"]
    assert isinstance(md, FlashAttentionMetadata) and md.use_cascade is cascade_on_decode


# Profiling builds no metadata and writes nothing -----------------------------------------------


def test_profile_run_builds_no_metadata_and_writes_nothing() -> None:
    _CountingBuilder.builds = []
    scenario = _scenario("hybrid", num_gpu_blocks=32)
    runner = ModelRunner(scenario.vllm_config, "cpu", _CountingBackend)
    runner.profile_run()  # before the KV cache exists, as in vLLM
    spec = runner.get_kv_cache_spec()
    runner.initialize_kv_cache(kv_cache_config_for_num_blocks(runner.vllm_config, spec, 32))
    runner.profile_run()  # and after: still no builder call, no KV write
    assert _CountingBuilder.builds == []
    assert all(not bool(t.any()) for t in runner.kv_caches.values())
    hidden = runner._dummy_run(8, skip_attn=False)  # the non-profiling dummy run does build
    assert len(_CountingBuilder.builds) == 2 and hidden.shape == (4, TINY.hidden_size)
    assert all(not bool(t.any()) for t in runner.kv_caches.values())  # ... into padding slots


def test_profile_run_uses_the_whole_token_budget() -> None:
    scenario = _scenario(max_num_seqs=3, max_num_batched_tokens=10)
    runner = ModelRunner(scenario.vllm_config, "cpu", "FLASH_ATTN")
    shapes: list[tuple[int, ...]] = []
    runner.model.model.embed_tokens.register_forward_hook(
        lambda _m, args, _out: shapes.append(tuple(args[0].shape))
    )
    runner.profile_run()
    assert shapes == [(10,)]


# Set-up errors -----------------------------------------------------------------------------


def test_execute_before_kv_cache_init_is_an_error() -> None:
    runner = ModelRunner(_scenario().vllm_config, "cpu", "FLASH_ATTN")
    so = SchedulerOutput([], [], {}, 0, [0])
    with pytest.raises(RuntimeError, match="initialize_kv_cache"):
        runner.execute_model(so)


def test_mla_backend_is_refused_for_the_llama_model() -> None:
    with pytest.raises(HarnessError, match="MLA backend"):
        ModelRunner(_scenario().vllm_config, "cpu", "TRITON_MLA")


def test_backend_by_name_or_class() -> None:
    by_name = ModelRunner(_scenario().vllm_config, "cpu", "FLASHINFER")
    by_class = ModelRunner(_scenario().vllm_config, "cpu", get_attn_backend("FLASHINFER"))
    assert by_name.attn_backend_cls is by_class.attn_backend_cls is FlashInferBackend


# Llama-3.1-8B's shape on meta ----------------------------------------------------------------


@pytest.mark.parametrize("backend", ["FLASH_ATTN", "FLASHINFER"])
def test_llama_8b_on_meta_runs_a_couple_of_steps(backend: str) -> None:
    model_config = dataclasses.replace(get_model_config("llama-3.1-8b"), max_model_len=4096)
    config = VllmConfig(
        model_config,
        CacheConfig(block_size=16),
        SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=512, max_model_len=4096),
    )
    runner = ModelRunner(config, "meta", backend)
    runner.profile_run()
    spec = runner.get_kv_cache_spec()
    assert len(spec) == 32 and all(isinstance(s, FullAttentionSpec) for s in spec.values())
    kv_cache_config = get_kv_cache_config(config, spec, 40 << 30)
    runner.initialize_kv_cache(kv_cache_config)
    layer_bytes = kv_cache_config.tensors["model.layers.0.self_attn.attn"].size
    cache = runner.kv_caches["model.layers.0.self_attn.attn"]
    assert cache.is_meta and cache.numel() * cache.element_size() == layer_bytes
    scheduler = Scheduler(config.scheduler_config, kv_cache_config)
    for i in range(3):
        scheduler.add_request(Request(f"r{i}", list(range(100 + 50 * i)), 2))
    for _ in range(2):
        so = scheduler.schedule()
        out = runner.execute_model(so, trace=True)
        scheduler.update_from_output(so, out)
        assert out.trace is not None and out.trace.hidden_states is not None
        assert out.trace.hidden_states.is_meta
    # Step 1 decoded the 3 requests: metadata shapes came from the CPU side.
    md = out.trace.attn_metadata["model.layers.31.self_attn.attn"]
    assert md.slot_mapping.shape == (3,)  # type: ignore[attr-defined]
    assert out.sampled_token_ids == [[0], [0], [0]]
    assert not scheduler.has_unfinished_requests()


def test_run_model_false_builds_metadata_without_a_forward() -> None:
    runner = build_runner(_scenario())
    assert runner.kv_cache_config is not None
    scheduler = Scheduler(_scenario().vllm_config.scheduler_config, runner.kv_cache_config)
    scheduler.add_request(Request("a", [1, 2, 3], 2))
    so = scheduler.schedule()
    out = runner.execute_model(so, run_model=False, trace=True)
    assert out.trace is not None and out.trace.hidden_states is None
    assert out.sampled_token_ids == [[0]]
    assert out.trace.attn_metadata and all(not bool(t.any()) for t in runner.kv_caches.values())


def test_no_trace_unless_asked_and_no_step_state_on_the_runner() -> None:
    runner = build_runner(_scenario())
    assert runner.kv_cache_config is not None
    scheduler = Scheduler(_scenario().vllm_config.scheduler_config, runner.kv_cache_config)
    scheduler.add_request(Request("a", [1, 2, 3], 2))
    out = runner.execute_model(scheduler.schedule())
    assert out.trace is None
    assert not hasattr(runner, "attn_metadata") and not hasattr(runner, "hidden_states")


def test_persistent_device_tensors_are_the_weights_and_the_runner_buffers() -> None:
    runner = ModelRunner(_scenario("hybrid").vllm_config, "meta", "FLASHINFER")
    tensors = runner.persistent_device_tensors()
    assert sorted(tensors) == ["runner buffers", "weights"]
    model = runner.get_model()
    assert len(tensors["weights"]) == len([*model.parameters(), *model.buffers()])
    buffers = {id(t) for t in tensors["runner buffers"]}
    assert id(runner.input_ids) in buffers and id(runner.positions) in buffers
    for table in runner.input_batch.block_table.block_tables:  # one per group
        assert id(table.block_table) in buffers and id(table.slot_mapping) in buffers
    assert all(t.device.type == "meta" for ts in tensors.values() for t in ts)


def test_wrapped_decoder_layers_are_called_in_order() -> None:
    runner = build_runner(_scenario())
    calls: list[int] = []

    class Spy(torch.nn.Module):
        def __init__(self, layer: torch.nn.Module, index: int) -> None:
            super().__init__()
            self.layer, self.index = layer, index

        def forward(self, *args: Any) -> Any:
            calls.append(self.index)
            return self.layer(*args)

    count = iter(range(100))
    runner.wrap_decoder_layers(lambda layer: Spy(layer, next(count)))
    assert runner.kv_cache_config is not None
    scheduler = Scheduler(_scenario().vllm_config.scheduler_config, runner.kv_cache_config)
    scheduler.add_request(Request("a", [1, 2, 3], 1))
    trace = _execute(runner, scheduler.schedule())
    assert calls == list(range(TINY.num_hidden_layers))
    assert dense_check(runner.get_model(), trace) <= oracle_tolerance(trace)  # same outputs
