"""Layer replay: identical decoder layers of a step allocate the same, so account them without running.

:func:`install_layer_replay` wraps every decoder layer. The first layer of a step runs while the
ledger records its events; each later layer with the same key (class, window, impl, input shapes
and dtypes, KV cache shape, metadata identity) replays them, so the device check runs on each,
and returns an untracked ``meta`` tensor of the output's shape. :meth:`LayerReplay.clear` must run
after each forward. Why this is sound: ``docs/simulation.md``; ``memoize=False`` runs every layer.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from harness.memory.ledger import Ledger, LedgerEvent, Recording
from harness.reference.model import LlamaDecoderLayer
from harness.reference.runner import ModelRunner
from harness.torch_compat import disable_current_modes


@dataclass(eq=False)
class _Replayable:
    events: list[LedgerEvent]
    """The recorded events, the output's allocation included."""
    output_index: int
    shape: torch.Size
    stride: tuple[int, ...]
    dtype: torch.dtype
    keep: object
    """The metadata object of the key, kept alive so its identity is not reused."""


def _replayable(recording: Recording, out: object, keep: object) -> _Replayable | None:
    if recording.external_free or not isinstance(out, torch.Tensor) or not out.is_meta:
        return None
    leftovers = list(recording.live.values())
    if len(leftovers) != 1:
        return None
    index = leftovers[0]
    allocation = recording.events[index].allocation
    if allocation is None or allocation.nbytes != out.untyped_storage().nbytes():
        return None
    if tuple(allocation.shape) != tuple(out.shape):
        return None
    return _Replayable(
        events=recording.events,
        output_index=index,
        shape=out.shape,
        stride=out.stride(),
        dtype=out.dtype,
        keep=keep,
    )


class LayerReplay:
    """The replaying wrappers of one runner's decoder layers and the memo they share."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.num_replays = 0
        """Layer forwards replayed instead of run, so far."""
        self.memo: dict[tuple[Any, ...], _Replayable | bool] = {}

    def clear(self) -> None:
        """Forget every recording: call right after each forward (see the module docstring)."""
        self.memo.clear()

    def wrap(self, layer: nn.Module) -> nn.Module:
        """The replaying stand-in for ``layer`` (a :class:`LlamaDecoderLayer`)."""
        if not isinstance(layer, LlamaDecoderLayer):
            raise TypeError(f"layer replay wraps LlamaDecoderLayer, got {type(layer).__name__}")
        return _ReplayingLayer(layer, self)


class _ReplayingLayer(nn.Module):
    """A decoder layer that replays the allocations of an identical earlier layer."""

    def __init__(self, layer: LlamaDecoderLayer, replay: LayerReplay) -> None:
        super().__init__()
        self.layer = layer
        self._replay = replay

    def forward(
        self,
        positions: torch.Tensor,
        hidden_states: torch.Tensor,
        kv_caches: dict[str, torch.Tensor],
        attn_metadata: dict[str, object] | None,
    ) -> torch.Tensor:
        attn = self.layer.self_attn.attn
        name = attn.layer_name
        metadata = None if attn_metadata is None else attn_metadata[name]
        kv_cache = kv_caches.get(name)
        key = (
            type(self.layer),
            attn.sliding_window,
            type(attn.impl),
            tuple(positions.shape),
            positions.dtype,
            tuple(hidden_states.shape),
            hidden_states.dtype,
            None if kv_cache is None else (tuple(kv_cache.shape), kv_cache.dtype),
            id(metadata),
        )
        memo = self._replay.memo
        entry = memo.get(key)
        if isinstance(entry, _Replayable):
            self._replay.num_replays += 1
            return self._issue(entry)
        with self._replay.ledger.recording() as recording:
            out: torch.Tensor = self.layer(positions, hidden_states, kv_caches, attn_metadata)
        if entry is None:
            memo[key] = _replayable(recording, out, metadata) or False
        return out

    def _issue(self, entry: _Replayable) -> torch.Tensor:
        """Issue the recorded events; the output becomes a real (untracked) tensor we account."""
        ledger = self._replay.ledger
        tokens: dict[int, int] = {}
        try:
            for is_alloc, index, allocation, _ in entry.events:
                if not is_alloc:
                    ledger.free(tokens.pop(index))
                    continue
                assert allocation is not None
                tokens[index] = ledger.allocate(allocation)
        except BaseException:
            for token in tokens.values():
                ledger.free(token)
            raise
        with disable_current_modes():  # the tracker must not count it twice
            out = torch.empty_strided(entry.shape, entry.stride, dtype=entry.dtype, device="meta")
        weakref.finalize(out.untyped_storage(), ledger.free, tokens.pop(entry.output_index))
        assert not tokens, "a replayable recording frees all but its output"
        return out


def install_layer_replay(runner: ModelRunner, ledger: Ledger) -> LayerReplay:
    """Wrap every decoder layer of ``runner`` so that identical layers replay (module doc)."""
    replay = LayerReplay(ledger)
    runner.wrap_decoder_layers(replay.wrap)
    return replay
