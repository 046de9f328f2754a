"""``flashinfer-global-config``: the FlashInfer builder read the global config it was no longer in.

PR #17483 moved building metadata builders outside ``set_current_vllm_config``; the V1 FlashInfer
builder still read ``get_current_vllm_config()`` and planned with a default config. PR #18086
made it use the runner's ``vllm_config``. The buggy builder returns the global config from
``_get_vllm_config``; the fixed builder is the reference one. Details: ``docs/regressions.md``.
"""

from __future__ import annotations

import warnings

from harness.errors import HarnessError
from harness.reference.backends.flashinfer import FlashInferBackend, FlashInferMetadataBuilder
from harness.reference.config import (
    CacheConfig,
    ConfigReadOutsideContextWarning,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
    get_current_vllm_config,
)
from harness.regressions.checks import variant_engine
from harness.regressions.entry import Check, CheckOutcome, Regression, Upstream, Variant


class FlashInferGlobalConfigMetadataBuilder(FlashInferMetadataBuilder):
    """The FlashInfer builder reading the global config instead of the one it is given."""

    def _get_vllm_config(self) -> VllmConfig:
        return get_current_vllm_config()


class FlashInferGlobalConfigBackend(FlashInferBackend):
    """FlashInfer with the global-config builder."""

    @staticmethod
    def get_builder_cls() -> type[FlashInferGlobalConfigMetadataBuilder]:
        return FlashInferGlobalConfigMetadataBuilder


SERVED_MODEL = ModelConfig(
    name="global-config-check",
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=128,
    max_model_len=128,
    sliding_window=8,
    layer_types=("sliding_attention", "sliding_attention"),
)
"""Unlike the default config's model in every parameter FlashInfer plans with; a head size and one
window for all layers, as vLLM 0.9.0's FlashInfer requires."""


def _plan_parameters(variant: Variant) -> CheckOutcome:
    """Builders made at KV-cache initialisation (outside the config context), then a prefill
    and a decode step: the planned heads, scale and window must be the served model's."""
    config = VllmConfig(
        model_config=SERVED_MODEL,
        cache_config=CacheConfig(block_size=16),
        scheduler_config=SchedulerConfig(
            max_num_seqs=4, max_num_batched_tokens=64, max_model_len=128
        ),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConfigReadOutsideContextWarning)
        engine = variant_engine(variant, config, 32, [(9, 3), (6, 3)])
        engine.step()
        engine.step()
    builder = engine.runner.attn_metadata_builders[0]
    if not isinstance(builder, FlashInferMetadataBuilder):
        raise HarnessError(f"{variant.label} is not a FlashInfer-style backend")
    params = builder.global_hyperparameters  # what the two builds planned with
    expected = (8, 128**-0.5, 7)
    got = (
        builder.num_qo_heads,
        None if params is None else params.sm_scale,
        None if params is None else params.window_left,
    )
    reads = [w for w in caught if issubclass(w.category, ConfigReadOutsideContextWarning)]
    if got != expected or reads:
        return CheckOutcome(
            True,
            f"planned (num_qo_heads, sm_scale, window_left) = {got}, the served model needs "
            f"{expected}; {len(reads)} read(s) of the global config outside its context"
            + (f" ({reads[0].filename}:{reads[0].lineno})" if reads else ""),
        )
    return CheckOutcome(False, f"planned (num_qo_heads, sm_scale, window_left) = {got}, as served")


REGRESSION = Regression(
    id="flashinfer-global-config",
    title="FlashInfer builder read get_current_vllm_config() in its constructor, now called "
    "outside the config context",
    upstream=(
        Upstream("PR", 17483, "introduced by"),
        Upstream("PR", 18086, "fixed by"),
    ),
    bug_class="global state read out of context (wrong per-layer parameters)",
    component="FlashInferMetadataBuilder config access (the _get_vllm_config seam)",
    buggy=Variant(FlashInferGlobalConfigBackend),
    fixed=Variant(FlashInferBackend),
    checks=(
        Check(
            "plan-parameters",
            "builders made at KV-cache initialisation plan with the served model's heads, scale "
            "and window, without reading the global config",
            _plan_parameters,
        ),
    ),
    found_upstream="Reported in a comment on PR #17483: `lm_eval --model vllm ... --tasks gsm8k` "
    "with VLLM_ATTENTION_BACKEND=FLASHINFER failed with the 'No attention layers found in the "
    "model.' assertion; PR #18086 passed the runner's config instead.",
    caught_by="A CPU test that builds every backend's builder where the runner does "
    "(initialize_kv_cache, outside set_current_vllm_config) and compares the planned "
    "per-layer parameters with the model's, failing on any out-of-context config read.",
    doc=__doc__ or "",
)
