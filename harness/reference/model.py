"""A Llama-shaped decoder for the reference runner (vLLM's ``model_executor/models/llama.py``, tiny).

Attention layers are named ``model.layers.{i}.self_attn.attn`` as in vLLM and get their metadata
explicitly: ``forward(input_ids, positions, kv_caches, attn_metadata)`` (dicts keyed by layer
name); ``attn_metadata=None`` is the profiling run (attention writes nothing, returns zeros).
Weights are seeded random numbers; on ``meta`` they cost nothing, so the runner drives
Llama-3.1-8B's shape for memory accounting. On ``meta``, norms and rotary embeddings return fresh
tensors of the right shape (the allocation the real op makes) without computing: torch runs
elementwise meta kernels in Python, which dominated an 8B forward for no information
(``scripts/bench_simulate.py`` times the simulation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from harness.reference.backends.abstract import AttentionImpl
from harness.reference.config import ModelConfig
from harness.reference.oracle import as_dtype, dense_attention


@dataclass(frozen=True)
class DenseAttentionMetadata:
    """Metadata of the dense reference pass: one sequence, no KV cache (``dense_attention``)."""


DENSE = DenseAttentionMetadata()


class Linear(nn.Module):
    """``y = x @ weight.T`` with an uninitialised weight (``build_model`` seeds it; meta needs none)."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.weight)


class VocabEmbedding(nn.Module):
    """Token embedding table with an uninitialised weight."""

    def __init__(self, vocab_size: int, hidden_size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, hidden_size))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return nn.functional.embedding(input_ids, self.weight)


class RMSNorm(nn.Module):
    """Root-mean-square layer norm, computed in float32."""

    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.is_meta:  # no data: the output's shape only (see the module docstring)
            return torch.empty_like(x)
        x32 = as_dtype(x, torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return as_dtype(x32 * as_dtype(self.weight, torch.float32), x.dtype)


class RotaryEmbedding(nn.Module):
    """Neox-style rotary position embedding of query and key, from integer positions."""

    inv_freq: torch.Tensor

    def __init__(self, head_dim: int, rope_theta: float) -> None:
        super().__init__()
        exponents = torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim
        self.register_buffer("inv_freq", 1.0 / (rope_theta**exponents), persistent=False)

    def forward(
        self, positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``query``/``key`` are ``(num_tokens, heads, head_dim)``; returns them rotated."""
        if query.is_meta:  # no data: the outputs' shapes only (see the module docstring)
            return torch.empty_like(query), torch.empty_like(key)
        inv_freq = self.inv_freq
        if inv_freq.device != positions.device:
            inv_freq = inv_freq.to(positions.device)
        freqs = as_dtype(positions, torch.float32).unsqueeze(-1) * inv_freq
        cos = freqs.cos().unsqueeze(1)
        sin = freqs.sin().unsqueeze(1)
        return _rotate(query, cos, sin), _rotate(key, cos, sin)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = as_dtype(x, torch.float32).chunk(2, dim=-1)
    return as_dtype(torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1), x.dtype)


class Attention(nn.Module):
    """vLLM's ``Attention`` layer: its name and window; ``impl`` is set by the runner per group."""

    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int,
        sliding_window: int | None,
        prefix: str,
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = scale
        self.num_kv_heads = num_kv_heads
        self.sliding_window = sliding_window
        self.layer_name = prefix
        self.impl: AttentionImpl[Any] | None = None

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor | None,
        attn_metadata: object | None,
    ) -> torch.Tensor:
        """``(num_tokens, heads, head_size)`` in, ``(num_tokens, num_heads * head_size)`` out."""
        num_tokens = query.shape[0]
        if attn_metadata is None:  # profiling run: no metadata, nothing written
            return query.new_zeros(num_tokens, self.num_heads * self.head_size)
        if isinstance(attn_metadata, DenseAttentionMetadata):
            out = dense_attention(
                query, key, value, scale=self.scale, sliding_window=self.sliding_window
            )
            return out.reshape(num_tokens, -1)
        if self.impl is None or kv_cache is None:
            raise RuntimeError(
                f"{self.layer_name}: no attention impl / KV cache; initialize_kv_cache first"
            )
        return self.impl.forward(query, key, value, kv_cache, attn_metadata)


class LlamaAttention(nn.Module):
    """QKV projection, rotary embedding, paged attention, output projection."""

    def __init__(self, config: ModelConfig, layer_idx: int, prefix: str) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        hidden = config.hidden_size
        self.qkv_proj = Linear(hidden, self.q_size + 2 * self.kv_size)
        self.o_proj = Linear(self.q_size, hidden)
        self.rotary_emb = RotaryEmbedding(self.head_dim, config.rope_theta)
        self.attn = Attention(
            self.num_heads,
            self.head_dim,
            self.head_dim**-0.5,
            self.num_kv_heads,
            config.layer_sliding_window(layer_idx),
            prefix=f"{prefix}.attn",
        )

    def forward(
        self,
        positions: torch.Tensor,
        hidden_states: torch.Tensor,
        kv_caches: dict[str, torch.Tensor],
        attn_metadata: dict[str, object] | None,
    ) -> torch.Tensor:
        qkv = self.qkv_proj(hidden_states)
        q, k, v = qkv.split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = q.view(-1, self.num_heads, self.head_dim)
        k = k.view(-1, self.num_kv_heads, self.head_dim)
        v = v.view(-1, self.num_kv_heads, self.head_dim)
        q, k = self.rotary_emb(positions, q, k)
        name = self.attn.layer_name
        metadata = None if attn_metadata is None else attn_metadata[name]
        out = self.attn(q, k, v, kv_caches.get(name), metadata)
        output: torch.Tensor = self.o_proj(out)
        return output


class LlamaMLP(nn.Module):
    """SwiGLU: ``down(silu(gate(x)) * up(x))`` with gate and up fused as in vLLM."""

    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        super().__init__()
        self.gate_up_proj = Linear(hidden_size, 2 * intermediate_size)
        self.down_proj = Linear(intermediate_size, hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        out: torch.Tensor = self.down_proj(nn.functional.silu(gate) * up)
        return out


class LlamaDecoderLayer(nn.Module):
    """Pre-norm attention block then pre-norm MLP block, each with a residual."""

    def __init__(self, config: ModelConfig, layer_idx: int, prefix: str) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(config, layer_idx, prefix=f"{prefix}.self_attn")
        self.mlp = LlamaMLP(config.hidden_size, config.intermediate_size)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(
        self,
        positions: torch.Tensor,
        hidden_states: torch.Tensor,
        kv_caches: dict[str, torch.Tensor],
        attn_metadata: dict[str, object] | None,
    ) -> torch.Tensor:
        h: torch.Tensor = hidden_states + self.self_attn(
            positions, self.input_layernorm(hidden_states), kv_caches, attn_metadata
        )
        mlp_out: torch.Tensor = self.mlp(self.post_attention_layernorm(h))
        return h + mlp_out


class LlamaModel(nn.Module):
    """Embedding, decoder layers, final norm."""

    def __init__(self, config: ModelConfig, prefix: str = "model") -> None:
        super().__init__()
        self.embed_tokens = VocabEmbedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(config, i, prefix=f"{prefix}.layers.{i}")
            for i in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        kv_caches: dict[str, torch.Tensor],
        attn_metadata: dict[str, object] | None,
    ) -> torch.Tensor:
        hidden_states = self.embed_tokens(input_ids)
        for layer in self.layers:
            hidden_states = layer(positions, hidden_states, kv_caches, attn_metadata)
        normed: torch.Tensor = self.norm(hidden_states)
        return normed


class LlamaForCausalLM(nn.Module):
    """The decoder plus ``lm_head``; ``forward`` returns hidden states, ``compute_logits`` logits."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = Linear(config.hidden_size, config.vocab_size)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        kv_caches: dict[str, torch.Tensor],
        attn_metadata: dict[str, object] | None,
    ) -> torch.Tensor:
        """``(num_tokens, hidden_size)`` hidden states of the flattened batch."""
        hidden_states: torch.Tensor = self.model(input_ids, positions, kv_caches, attn_metadata)
        return hidden_states

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """``(num_tokens, vocab_size)`` float32 logits."""
        logits: torch.Tensor = self.lm_head(hidden_states)
        return logits.float()

    def attention_layers(self) -> dict[str, Attention]:
        """Every attention layer by its vLLM name, in layer order."""
        return {m.layer_name: m for m in self.modules() if isinstance(m, Attention)}

    def dense_forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Hidden states of one whole sequence with dense attention and no KV cache (the oracle)."""
        positions = torch.arange(token_ids.shape[0], device=token_ids.device)
        metadata: dict[str, object] = dict.fromkeys(self.attention_layers(), DENSE)
        hidden_states: torch.Tensor = self(token_ids, positions, {}, metadata)
        return hidden_states


def weight_bytes(model: nn.Module) -> int:
    """Bytes of all parameters (also on ``meta``, where they occupy none)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def build_model(
    config: ModelConfig, device: torch.device | str = "cpu", seed: int = 0
) -> LlamaForCausalLM:
    """A ``LlamaForCausalLM`` of ``config``'s shape with seeded random weights on ``device``
    (linear uniform in ``±1/sqrt(fan_in)``, embeddings normal, norms one; nothing on ``meta``).
    """
    device = torch.device(device)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(config.dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default_dtype)
    if device.type != "meta":
        generator = torch.Generator(device="cpu").manual_seed(seed)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.endswith("norm.weight"):
                    continue
                values = torch.empty(param.shape, dtype=torch.float32)
                if param.dim() == 2 and "embed_tokens" not in name:
                    bound = param.shape[1] ** -0.5
                    values.uniform_(-bound, bound, generator=generator)
                else:
                    values.normal_(generator=generator)
                param.copy_(values)
    return model.eval().requires_grad_(False)
