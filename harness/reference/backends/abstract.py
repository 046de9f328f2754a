"""The attention backend interface (vLLM 0.9.0 ``vllm/attention/backends/abstract.py``) and the V1
builder contract: an abstract builder class (vLLM 0.9.2) built with its group's spec, config and
device and no runner (0.10.0), plus its group's block table (0.9.0); ``docs/fidelity.md``.

A backend names a metadata dataclass, the builder that makes one per step for its KV cache group,
and the impl that writes K/V and attends; builders never see a model runner or the global config.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt
import torch

from harness.reference.block_table import BlockTable
from harness.reference.common_metadata import CommonAttentionMetadata
from harness.reference.config import VllmConfig
from harness.reference.kv_cache_interface import AttentionSpec

M = TypeVar("M")


class InputBatchLike(Protocol):
    """What ``reorder_batch`` needs of the runner's persistent batch (vLLM's ``InputBatch``)."""

    @property
    def req_ids(self) -> Sequence[str]: ...

    def swap_states(self, i1: int, i2: int) -> None:
        """Exchange everything the batch holds for rows ``i1`` and ``i2`` (block tables too)."""


class SchedulerOutputLike(Protocol):
    """What ``reorder_batch`` needs of the scheduler's output (vLLM's ``SchedulerOutput``)."""

    @property
    def num_scheduled_tokens(self) -> Mapping[str, int]:
        """Request id -> tokens scheduled for it in this step."""
        ...


@runtime_checkable
class KVCacheAware(Protocol):
    """A builder that wants its KV cache group's tensors: the documented hook for user variants.

    ``ModelRunner.initialize_kv_cache`` hands a builder that declares ``bind_kv_caches`` its group's
    caches (layer name -> tensor) right after allocating them (vLLM 0.9.0 builders read
    ``runner.kv_caches``; ours get no runner).
    """

    def bind_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None: ...


class AttentionMetadataBuilder(ABC, Generic[M]):
    """Builds one KV cache group's attention metadata ``M`` once per step."""

    def __init__(
        self,
        kv_cache_spec: AttentionSpec,
        block_table: BlockTable,
        vllm_config: VllmConfig,
        device: torch.device | str,
    ) -> None:
        self.kv_cache_spec = kv_cache_spec
        self.block_table = block_table
        self.vllm_config = vllm_config
        self.device = torch.device(device)

    def _get_vllm_config(self) -> VllmConfig:
        """The config every read of this builder goes through: the one it was given.

        An extension point: a subclass that must take its config from elsewhere overrides this
        one method (vLLM 0.9.0's FlashInfer builder read ``get_current_vllm_config()``, the
        global, which ``flashinfer-global-config`` replays).
        """
        return self.vllm_config

    @abstractmethod
    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata) -> M:
        """This step's metadata for the group; ``common_prefix_len`` > 0 asks for cascade."""

    def reorder_batch(
        self, input_batch: InputBatchLike, scheduler_output: SchedulerOutputLike
    ) -> bool:
        """Reorder the persistent batch in place for this backend; True if it changed."""
        del input_batch, scheduler_output
        return False

    def use_cascade_attention(
        self,
        common_prefix_len: int,
        query_lens: npt.NDArray[np.int32],
        num_query_heads: int,
        num_kv_heads: int,
        use_alibi: bool,
        use_sliding_window: bool,
        num_sms: int,
    ) -> bool:
        """Whether cascade attention pays off for this batch; backends without it say False."""
        del common_prefix_len, query_lens, num_query_heads, num_kv_heads
        del use_alibi, use_sliding_window, num_sms
        return False


class AttentionImpl(ABC, Generic[M]):
    """One layer's attention: writes this step's K/V into the paged cache, then attends (with the
    oracle; on ``meta`` ``forward`` only checks and returns shapes).
    """

    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int,
        sliding_window: int | None = None,
    ) -> None:
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not a multiple of {num_kv_heads=}")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads
        self.sliding_window = sliding_window

    @property
    def output_head_size(self) -> int:
        """Per-head width of the output (``head_size``; MLA returns its latent width)."""
        return self.head_size

    @abstractmethod
    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: M | None,
    ) -> torch.Tensor:
        """``(num_tokens, num_heads * output_head_size)``; zeros when ``attn_metadata`` is None.

        ``attn_metadata is None`` is vLLM's profiling run: nothing is written or read.
        """

    def _empty_output(self, query: torch.Tensor) -> torch.Tensor:
        """Zeros of the output shape (also the whole answer on ``meta``)."""
        return query.new_zeros(query.shape[0], self.num_heads * self.output_head_size)


class AttentionBackend(ABC):
    """Names a backend's metadata, builder and impl classes and its KV cache layout."""

    @staticmethod
    @abstractmethod
    def get_name() -> str:
        """vLLM's name for the backend, e.g. ``FLASH_ATTN_VLLM_V1``."""

    @staticmethod
    @abstractmethod
    def get_kv_cache_shape(
        num_blocks: int, block_size: int, num_kv_heads: int, head_size: int
    ) -> tuple[int, ...]:
        """Shape of one layer's KV cache tensor."""

    @staticmethod
    @abstractmethod
    def get_builder_cls() -> type[AttentionMetadataBuilder[Any]]: ...

    @staticmethod
    @abstractmethod
    def get_metadata_cls() -> type[Any]: ...

    @staticmethod
    @abstractmethod
    def get_impl_cls() -> type[AttentionImpl[Any]]: ...
