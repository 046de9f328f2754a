"""Pure-torch paged attention: the executable oracle every reference backend computes with.

``reshape_and_cache`` writes K/V through a slot mapping (vLLM's ``reshape_and_cache_flash``),
``paged_attention`` reads them back through block tables, ``dense_attention`` computes the same
from contiguous K/V; they agree to :data:`FP32_ATOL`/:data:`FP32_RTOL`. A request's queries are its
newest ``query_len`` positions; query ``p`` sees key ``j`` iff ``j <= p`` and
``p - j < sliding_window`` (vLLM's ``window_size = (sliding_window - 1, 0)``). Real data only: on
``meta`` callers skip these functions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

PAD_SLOT_ID = -1
"""Slot of a padding token: ``reshape_and_cache`` skips it (vLLM's ``PAD_SLOT_ID``)."""

FP32_ATOL = 1e-5
"""Absolute tolerance of paged vs dense attention in float32 (sums run in another order)."""
FP32_RTOL = 1e-5
"""Relative tolerance of paged vs dense attention in float32."""


def as_dtype(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` in ``dtype``: ``t`` itself when it already is, without dispatching an op (under a
    memory tracker every dispatched op costs as much as a small kernel), else a converted copy."""
    return t if t.dtype == dtype else t.to(dtype)


def to_int_list(t: torch.Tensor) -> list[int]:
    """A 1-D integer tensor's values as Python ints (one device-to-host copy)."""
    values: list[int] = t.tolist()  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return values


def _write_slots(x: torch.Tensor, cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """``cache[slot // block_size, slot % block_size] = x[t]`` for every token with a real slot."""
    num_tokens = slot_mapping.shape[0]
    block_size = cache.shape[1]
    valid = slot_mapping != PAD_SLOT_ID
    slots = slot_mapping[valid]
    # Index the (possibly strided) view in place: never flatten, which could copy.
    cache[slots // block_size, slots % block_size] = as_dtype(x[:num_tokens][valid], cache.dtype)


def reshape_and_cache(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Write each token's K and V into its slot of the paged caches.

    ``key``/``value`` are ``(num_tokens, num_kv_heads, head_size)`` and may be longer than
    ``slot_mapping`` (padded batch): only the first ``len(slot_mapping)`` tokens are written, as
    vLLM's op does. ``key_cache``/``value_cache`` are ``(num_blocks, block_size, num_kv_heads,
    head_size)`` views; ``slot_mapping`` is ``(num_actual_tokens,)`` int64 and slots equal to
    :data:`PAD_SLOT_ID` are skipped.
    """
    _write_slots(key, key_cache, slot_mapping)
    _write_slots(value, value_cache, slot_mapping)


def concat_and_cache_mla(
    kv_c: torch.Tensor, k_pe: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor
) -> None:
    """Write ``[kv_c, k_pe]`` of each token into its slot of the MLA latent cache.

    ``kv_c`` is ``(num_tokens, kv_lora_rank)``, ``k_pe`` is ``(num_tokens, qk_rope_head_dim)`` and
    ``kv_cache`` is ``(num_blocks, block_size, kv_lora_rank + qk_rope_head_dim)``.
    """
    _write_slots(torch.cat([kv_c, k_pe], dim=-1), kv_cache, slot_mapping)


def _attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    scale: float,
    causal: bool,
    sliding_window: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of the newest ``len(query)`` positions over ``len(key)`` keys, in float32.

    Returns the output ``(query_len, num_heads, head_size_v)`` and the log-sum-exp of the scores
    ``(query_len, num_heads)``.
    """
    query_len, num_heads, _ = query.shape
    seq_len, num_kv_heads, _ = key.shape
    group = num_heads // num_kv_heads
    k = key.float().repeat_interleave(group, dim=1)
    v = value.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", query.float(), k) * scale
    q_pos = torch.arange(seq_len - query_len, seq_len).unsqueeze(1)
    k_pos = torch.arange(seq_len).unsqueeze(0)
    visible = torch.ones(query_len, seq_len, dtype=torch.bool)
    if causal:
        visible &= k_pos <= q_pos
    if sliding_window is not None:
        visible &= q_pos - k_pos < sliding_window
    scores = scores.masked_fill(~visible.to(scores.device), float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)
    return out, lse.transpose(0, 1)


DECODE_BATCH = 8
"""Decodes (one query token each) attended in one batch of at most this many consecutive requests.

It bounds the padded K/V copy, which then stays in the CPU's caches between the gather and the two
products that read it; the result equals attending the requests one by one."""


def _attend_decodes(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: list[int],
    *,
    scale: float,
    sliding_window: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``_attend`` for requests with one query token each, batched over padded K/V.

    ``query`` is ``(num_reqs, num_heads, head_size)``, ``block_table`` the requests' rows. Keys a
    request cannot see are masked and their values zeroed (unwritten slots may hold NaN).
    """
    num_reqs, num_heads, _ = query.shape
    block_size, num_kv_heads = key_cache.shape[1], key_cache.shape[2]
    num_blocks = -(-max(seq_lens) // block_size)
    padded_len = num_blocks * block_size
    block_ids = block_table[:, :num_blocks].flatten()
    k = as_dtype(key_cache.index_select(0, block_ids), torch.float32)
    k = k.view(num_reqs, padded_len, num_kv_heads, -1)
    v = as_dtype(value_cache.index_select(0, block_ids), torch.float32)  # fresh: zeroed below
    lens = torch.tensor(seq_lens, device=query.device).unsqueeze(1)
    k_pos = torch.arange(padded_len, device=query.device)
    hidden = k_pos >= lens
    if sliding_window is not None:
        hidden |= lens - 1 - k_pos >= sliding_window
    v.view(num_reqs * padded_len, -1).index_fill_(0, hidden.flatten().nonzero().squeeze(1), 0.0)
    v = v.view(num_reqs, padded_len, num_kv_heads, -1)
    q = as_dtype(query, torch.float32).reshape(
        num_reqs, num_kv_heads, num_heads // num_kv_heads, -1
    )
    scores = torch.stack(
        [torch.bmm(q[:, h], k[:, :, h].transpose(1, 2)) for h in range(num_kv_heads)], dim=1
    )
    scores = scores.mul_(scale).masked_fill_(hidden[:, None, None, :], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.softmax(scores, dim=-1)
    out = torch.stack([torch.bmm(probs[:, h], v[:, :, h]) for h in range(num_kv_heads)], dim=1)
    return out.view(num_reqs, num_heads, -1), lse.view(num_reqs, num_heads)


def _decode_runs(starts: list[int], lens: list[int]) -> list[tuple[int, int]]:
    """``(first, count)`` of each batch of at most :data:`DECODE_BATCH` consecutive decodes (whose
    query rows are consecutive, so a batch is two slices).
    """
    runs: list[tuple[int, int]] = []
    for i, seq_len in enumerate(lens):
        if starts[i + 1] - starts[i] != 1 or seq_len <= 0:
            continue
        if runs and runs[-1][0] + runs[-1][1] == i and runs[-1][1] < DECODE_BATCH:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((i, 1))
    return runs


def paged_attention(
    query: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    *,
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: torch.Tensor,
    scale: float,
    sliding_window: int | None = None,
    causal: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of each request's queries over the K/V its block-table row points at.

    ``query`` is ``(num_tokens, num_heads, head_size)``; request ``i`` owns rows
    ``query_start_loc[i]:query_start_loc[i + 1]`` and reads its first ``seq_lens[i]`` cache
    positions through ``block_table[i]``. Caches are ``(num_blocks, block_size, num_kv_heads,
    head_size[_v])``. Returns the output ``(num_tokens, num_heads, head_size_v)`` in the query's
    dtype (rows no request owns stay zero) and the float32 log-sum-exp ``(num_tokens, num_heads)``
    (``-inf`` on those rows), which :func:`merge_attn_states` needs for cascade attention.
    Requests are attended one by one, except runs of consecutive decodes, which go in batches of
    up to :data:`DECODE_BATCH` (:func:`_attend_decodes`).
    """
    num_tokens, num_heads, _ = query.shape
    block_size = key_cache.shape[1]
    out = query.new_zeros(num_tokens, num_heads, value_cache.shape[-1])
    lse = torch.full((num_tokens, num_heads), float("-inf"), device=query.device)
    starts = to_int_list(query_start_loc)
    lens = to_int_list(seq_lens)
    batched: set[int] = set()
    for first, count in _decode_runs(starts, lens):
        rows = slice(starts[first], starts[first] + count)
        out[rows], lse[rows] = _attend_decodes(
            query[rows],
            key_cache,
            value_cache,
            block_table[first : first + count],
            lens[first : first + count],
            scale=scale,
            sliding_window=sliding_window,
        )
        batched.update(range(first, first + count))
    for i, seq_len in enumerate(lens):
        if i in batched:
            continue
        start, end = starts[i], starts[i + 1]
        num_blocks = -(-seq_len // block_size)
        blocks = block_table[i, :num_blocks].long()
        k = key_cache[blocks].flatten(0, 1)[:seq_len]
        v = value_cache[blocks].flatten(0, 1)[:seq_len]
        o, s = _attend(
            query[start:end], k, v, scale=scale, causal=causal, sliding_window=sliding_window
        )
        out[start:end] = o.to(out.dtype)
        lse[start:end] = s
    return out, lse


def merge_attn_states(
    prefix_output: torch.Tensor,
    prefix_lse: torch.Tensor,
    suffix_output: torch.Tensor,
    suffix_lse: torch.Tensor,
) -> torch.Tensor:
    """Combine attention over two disjoint key sets (cascade: shared prefix + own suffix).

    Outputs are ``(num_tokens, num_heads, head_size)``, log-sum-exps ``(num_tokens, num_heads)``.
    Each output is weighted by its share of the total softmax mass, as vLLM's op does.
    """
    lse = torch.logaddexp(prefix_lse, suffix_lse)
    w_prefix = torch.exp(prefix_lse - lse).nan_to_num(0.0).unsqueeze(-1)
    w_suffix = torch.exp(suffix_lse - lse).nan_to_num(0.0).unsqueeze(-1)
    merged = prefix_output.float() * w_prefix + suffix_output.float() * w_suffix
    return merged.to(prefix_output.dtype)


def dense_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    scale: float,
    sliding_window: int | None = None,
    causal: bool = True,
) -> torch.Tensor:
    """The reference for one request: contiguous K/V, ``scaled_dot_product_attention``, no paging.

    ``query`` ``(query_len, num_heads, head_size)`` holds the newest ``query_len`` positions of a
    sequence whose keys/values are ``(seq_len, num_kv_heads, head_size)``. Returns
    ``(query_len, num_heads, head_size_v)`` in the query's dtype.
    """
    query_len, num_heads, _ = query.shape
    seq_len, num_kv_heads, _ = key.shape
    q_pos = torch.arange(seq_len - query_len, seq_len).view(-1, 1)
    k_pos = torch.arange(seq_len).view(1, -1)
    mask = (k_pos <= q_pos) if causal else torch.ones(query_len, seq_len, dtype=torch.bool)
    if sliding_window is not None:
        mask = mask & (q_pos - k_pos < sliding_window)
    out = F.scaled_dot_product_attention(
        query.float().transpose(0, 1),
        key.float().transpose(0, 1),
        value.float().transpose(0, 1),
        attn_mask=mask.to(query.device),
        scale=scale,
        enable_gqa=num_heads != num_kv_heads,
    )
    return out.transpose(0, 1).to(query.dtype)
