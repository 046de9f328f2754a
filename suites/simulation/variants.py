"""Backend variants the scaling detector was never tuned on: test fixtures, not catalog entries.

Each is written the way a user would write one: a FlashInfer builder subclass that declares
``bind_kv_caches`` (the documented hook) and does something extra when it plans a step.

- :class:`KVDtypeCastBackend`: casts every layer's KV cache to float32 each step (as for a
  kernel that wants float32 pages). One layer's cache in float32 per layer: scales with
  ``num_blocks``. On a float32 cache the cast is free, so a float32 run cannot see it.
- :class:`HostBuiltBackend`: builds a per-block occupancy map with numpy on the host and moves it
  to the device each step. Scales with ``num_blocks``; on the CPU the move is a no-op and the
  numpy buffer is no aten allocation, so a CPU run cannot see it.
- :class:`ConstantWorkspaceBackend`: allocates a 64 MiB workspace each step, the same size at any
  ``num_blocks``: large, but not the class; it must not be flagged.
- :class:`ThreadedOOMBackend`: ``flashinfer-oom``'s per-step copy of every layer's KV cache, made
  in a ``threading.Thread`` (an exception there ends that thread only); every driver must see it.
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from harness.reference.backends.flashinfer import (
    FlashInferBackend,
    FlashInferMetadata,
    FlashInferMetadataBuilder,
)
from harness.regressions.flashinfer_oom import FlashInferOOMMetadataBuilder

WORKSPACE_BYTES = 64 << 20


class _KVCacheAwareBuilder(FlashInferMetadataBuilder):
    kv_caches: dict[str, torch.Tensor]

    def bind_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        self.kv_caches = dict(kv_caches)


class KVDtypeCastBuilder(_KVCacheAwareBuilder):
    """Casts each layer's KV cache to float32 when it plans a step."""

    def _plan(self, attn_metadata: FlashInferMetadata) -> None:
        self.float32_pages = {
            name: kv_cache.to(torch.float32) for name, kv_cache in self.kv_caches.items()
        }
        super()._plan(attn_metadata)


class HostBuiltBuilder(_KVCacheAwareBuilder):
    """Builds a block occupancy map with numpy and moves it to the device each step."""

    def _plan(self, attn_metadata: FlashInferMetadata) -> None:
        num_blocks = next(iter(self.kv_caches.values())).shape[0]
        occupied = np.zeros(num_blocks, dtype=np.int32)
        occupied[np.unique(self.block_table.get_numpy_array())] = 1
        self.occupancy = torch.from_numpy(occupied).to(self.device)
        super()._plan(attn_metadata)


class ConstantWorkspaceBuilder(FlashInferMetadataBuilder):
    """Allocates a fixed-size workspace each step."""

    def _plan(self, attn_metadata: FlashInferMetadata) -> None:
        self.step_workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=self.device)
        super()._plan(attn_metadata)


class KVDtypeCastBackend(FlashInferBackend):
    """FlashInfer with :class:`KVDtypeCastBuilder`."""

    @staticmethod
    def get_builder_cls() -> type[FlashInferMetadataBuilder]:
        return KVDtypeCastBuilder


class HostBuiltBackend(FlashInferBackend):
    """FlashInfer with :class:`HostBuiltBuilder`."""

    @staticmethod
    def get_builder_cls() -> type[FlashInferMetadataBuilder]:
        return HostBuiltBuilder


class ConstantWorkspaceBackend(FlashInferBackend):
    """FlashInfer with :class:`ConstantWorkspaceBuilder`."""

    @staticmethod
    def get_builder_cls() -> type[FlashInferMetadataBuilder]:
        return ConstantWorkspaceBuilder


class ThreadedOOMBuilder(FlashInferOOMMetadataBuilder):
    """``flashinfer-oom``'s HND copies, made in a worker thread."""

    def _plan(self, attn_metadata: FlashInferMetadata) -> None:
        def convert() -> None:
            self.paged_kv_cache_hnd = {
                name: kv_cache.permute(0, 1, 3, 2, 4).clone(memory_format=torch.contiguous_format)
                for name, kv_cache in self.kv_caches.items()
            }

        worker = threading.Thread(target=convert)
        worker.start()
        worker.join()
        FlashInferMetadataBuilder._plan(self, attn_metadata)


class ThreadedOOMBackend(FlashInferBackend):
    """FlashInfer with :class:`ThreadedOOMBuilder`."""

    @staticmethod
    def get_builder_cls() -> type[FlashInferMetadataBuilder]:
        return ThreadedOOMBuilder


SCALING = {"kv-dtype-cast": KVDtypeCastBackend, "host-built": HostBuiltBackend}
"""Variants whose per-step allocations scale with ``num_blocks``."""
CONSTANT = {"constant-workspace": ConstantWorkspaceBackend}
"""Variants whose per-step allocations do not."""
