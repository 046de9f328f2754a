"""The tiny Llama-shaped model: names, shapes, seeding, explicit metadata, meta, and the dense path."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from harness.reference.config import get_model_config
from harness.reference.model import DENSE, LlamaForCausalLM, build_model, weight_bytes

TINY = get_model_config("tiny")
HYBRID = get_model_config("tiny-hybrid")


def test_attention_layers_are_named_like_vllm_with_their_windows() -> None:
    layers = build_model(HYBRID).attention_layers()
    assert list(layers) == [f"model.layers.{i}.self_attn.attn" for i in range(4)]
    assert [layer.sliding_window for layer in layers.values()] == [None, 8, None, 8]
    assert all(layer.layer_name == name for name, layer in layers.items())


def test_weights_are_seeded() -> None:
    a, b, c = build_model(TINY, seed=0), build_model(TINY, seed=0), build_model(TINY, seed=1)
    for (name, pa), pb, pc in zip(
        a.named_parameters(), b.parameters(), c.parameters(), strict=True
    ):
        assert torch.equal(pa, pb), name
        assert name.endswith("norm.weight") or not torch.equal(pa, pc), name
    assert 1_000 < sum(p.numel() for p in a.parameters()) < 100_000  # "a few thousand"


def test_llama_8b_on_meta_counts_its_bytes_without_allocating() -> None:
    config = get_model_config("llama-3.1-8b")
    model = build_model(config, "meta")
    hidden, inter, kv = 4096, 14336, 8 * 128
    per_layer = hidden * (hidden + 2 * kv) + hidden * hidden + 3 * hidden * inter + 2 * hidden
    params = 2 * 128256 * hidden + 32 * per_layer + hidden
    assert params == 8_030_261_248  # Llama-3.1-8B's published parameter count
    assert weight_bytes(model) == 2 * params
    assert all(p.is_meta and p.dtype == torch.bfloat16 for p in model.parameters())
    ids = torch.zeros(5, dtype=torch.int64, device="meta")
    hidden_states = model(ids, ids, {}, None)
    assert hidden_states.is_meta and hidden_states.shape == (5, hidden)
    assert model.compute_logits(hidden_states).shape == (5, 128256)


def test_no_metadata_means_attention_returns_zeros() -> None:
    # vLLM's profiling run: no metadata, no KV cache; attention contributes nothing.
    model = build_model(TINY)
    ids, positions = torch.tensor([3, 1, 4, 1, 5]), torch.arange(5)
    seen: list[torch.Tensor] = []
    attn = model.model.layers[0].self_attn.attn
    attn.register_forward_hook(lambda _m, _a, out: seen.append(out))
    model(ids, positions, {}, None)
    assert seen[0].shape == (5, TINY.num_attention_heads * TINY.head_dim)
    assert not bool(seen[0].any())


def test_metadata_is_explicit_per_layer() -> None:
    model = build_model(TINY)
    with pytest.raises(KeyError, match=r"model\.layers\.1\.self_attn\.attn"):
        model(torch.tensor([1]), torch.tensor([0]), {}, {"model.layers.0.self_attn.attn": DENSE})
    with pytest.raises(RuntimeError, match="initialize_kv_cache"):
        model(
            torch.tensor([1]),
            torch.tensor([0]),
            {},
            dict.fromkeys(model.attention_layers(), object()),
        )


def test_dense_forward_is_causal() -> None:
    model = build_model(TINY)
    tokens = torch.tensor([5, 9, 2, 7, 1, 3])
    changed = tokens.clone()
    changed[4:] = torch.tensor([8, 8])
    a, b = model.dense_forward(tokens), model.dense_forward(changed)
    torch.testing.assert_close(a[:4], b[:4])
    assert not torch.allclose(a[4:], b[4:])


def test_sliding_window_layer_forgets_tokens_outside_the_window() -> None:
    config = dataclasses.replace(
        TINY, num_hidden_layers=1, sliding_window=3, layer_types=("sliding_attention",)
    )
    model: LlamaForCausalLM = build_model(config)
    tokens = torch.tensor([5, 9, 2, 7, 1, 3])
    changed = tokens.clone()
    changed[0] = 11  # position 0 is outside the window of positions 3.. (window 3)
    a, b = model.dense_forward(tokens), model.dense_forward(changed)
    torch.testing.assert_close(a[3:], b[3:])
    assert not torch.allclose(a[:3], b[:3])
