"""Per-group block allocation (vLLM 0.9.0's ``kv_cache_manager.py`` and ``single_type_kv_cache_manager.py``).

One ``SingleTypeKVCacheManager`` per KV cache group, each with its group's block size, all drawing
ids from one shared ``BlockPool``, as vLLM 0.9.1's ``kv_cache_coordinator.py`` does (0.9.0's
``KVCacheManager`` asserts a single group; with the default unified grouping there is one).
No prefix caching: a request's blocks are its own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from harness.reference.block_pool import BlockPool
from harness.reference.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheSpec,
    SlidingWindowSpec,
)


class SingleTypeKVCacheManager(ABC):
    """Blocks of every request for one KV cache group (one attention type, one block size)."""

    def __init__(self, kv_cache_spec: KVCacheSpec, block_pool: BlockPool, kv_cache_group_id: int):
        self.kv_cache_spec = kv_cache_spec
        self.block_size = kv_cache_spec.block_size
        self.block_pool = block_pool
        self.kv_cache_group_id = kv_cache_group_id
        self.req_to_blocks: dict[str, list[int]] = {}
        self._null_block = block_pool.null_block

    def get_num_blocks_to_allocate(self, request_id: str, num_tokens: int) -> int:
        """New blocks needed so the request has slots for ``num_tokens`` tokens in total."""
        num_required = -(-num_tokens // self.block_size)  # cdiv inlined: per request per step
        return max(0, num_required - len(self.req_to_blocks.get(request_id, ())))

    def allocate_new_blocks(self, request_id: str, num_tokens: int) -> list[int]:
        """Allocate (and return) the blocks ``get_num_blocks_to_allocate`` asked for."""
        blocks = self.req_to_blocks.setdefault(request_id, [])
        new_blocks = self.block_pool.get_new_blocks(
            self.get_num_blocks_to_allocate(request_id, num_tokens)
        )
        blocks.extend(new_blocks)
        return new_blocks

    def free(self, request_id: str) -> None:
        """Give all the request's blocks back, tail first (as vLLM does, for prefix-cache eviction order)."""
        self.block_pool.free_blocks(reversed(self.req_to_blocks.pop(request_id, [])))

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> None:
        """Free blocks no future query can attend to; only sliding window has any."""
        del request_id, num_computed_tokens

    @abstractmethod
    def get_num_common_prefix_blocks(self, request_id: str, num_running_requests: int) -> int:
        """Leading blocks of ``request_id`` shared by every running request (cascade attention)."""


class FullAttentionManager(SingleTypeKVCacheManager):
    """Full attention keeps every block until the request finishes."""

    def get_num_common_prefix_blocks(self, request_id: str, num_running_requests: int) -> int:
        num_common = 0
        for block in self.req_to_blocks.get(request_id, ()):
            if self.block_pool.ref_cnt[block] != num_running_requests:
                break
            num_common += 1
        return num_common


class SlidingWindowManager(SingleTypeKVCacheManager):
    """Sliding window frees blocks that fell out of the window, replacing them by the null block.

    The runner's block table still lists the old ids (vLLM 0.9.0 behaves the same): a correct
    sliding-window kernel never reads them, so a kernel that does reads someone else's KV.
    """

    def __init__(self, kv_cache_spec: KVCacheSpec, block_pool: BlockPool, kv_cache_group_id: int):
        super().__init__(kv_cache_spec, block_pool, kv_cache_group_id)
        assert isinstance(kv_cache_spec, SlidingWindowSpec)
        self.sliding_window = kv_cache_spec.sliding_window

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> None:
        # The next query is at position num_computed_tokens; it sees keys from
        # num_computed_tokens - sliding_window + 1 on, so earlier whole blocks are dead.
        last_useful_block = (num_computed_tokens - self.sliding_window + 1) // self.block_size
        blocks = self.req_to_blocks.get(request_id, [])
        removed: list[int] = []
        for i in range(min(last_useful_block, len(blocks)) - 1, -1, -1):
            if blocks[i] == self._null_block:
                break  # everything before it was removed by an earlier call
            removed.append(blocks[i])
            blocks[i] = self._null_block
        self.block_pool.free_blocks(removed)

    def get_num_common_prefix_blocks(self, request_id: str, num_running_requests: int) -> int:
        return 0  # as vLLM: no cascade attention for sliding window groups


spec_manager_map: dict[type[KVCacheSpec], type[SingleTypeKVCacheManager]] = {
    FullAttentionSpec: FullAttentionManager,
    SlidingWindowSpec: SlidingWindowManager,
}


class KVCacheManager:
    """Allocates each request's blocks in every KV cache group from one shared pool."""

    def __init__(self, kv_cache_config: KVCacheConfig, max_model_len: int) -> None:
        self.kv_cache_config = kv_cache_config
        self.max_model_len = max_model_len
        self.block_pool = BlockPool(kv_cache_config.num_blocks)
        self.single_type_managers = [
            spec_manager_map[type(group.kv_cache_spec)](group.kv_cache_spec, self.block_pool, i)
            for i, group in enumerate(kv_cache_config.kv_cache_groups)
        ]
        self._window_managers = [
            m for m in self.single_type_managers if isinstance(m, SlidingWindowManager)
        ]
        """The managers whose ``remove_skipped_blocks`` does something."""

    def allocate_slots(
        self, request_id: str, num_computed_tokens: int, num_new_tokens: int
    ) -> list[list[int]] | None:
        """Blocks for ``num_new_tokens`` more tokens: new block ids per group, or None if the pool is short.

        (vLLM returns ``KVCacheBlocks``; the ids per group are all the reference needs.)
        """
        managers = self.single_type_managers
        for manager in self._window_managers:
            manager.remove_skipped_blocks(request_id, num_computed_tokens)
        num_tokens = min(num_computed_tokens + num_new_tokens, self.max_model_len)
        needed = [m.get_num_blocks_to_allocate(request_id, num_tokens) for m in managers]
        total = sum(needed)
        if total == 0:  # most decode steps
            return [[] for _ in managers]
        if total > len(self.block_pool.free_block_queue):
            return None
        return [
            m.allocate_new_blocks(request_id, num_tokens) if n else []
            for m, n in zip(managers, needed, strict=True)
        ]

    def free(self, request_id: str) -> None:
        for manager in self.single_type_managers:
            manager.free(request_id)

    def get_block_ids(self, request_id: str) -> list[list[int]]:
        return [list(m.req_to_blocks.get(request_id, ())) for m in self.single_type_managers]

    def get_num_common_prefix_blocks(self, request_id: str, num_running_requests: int) -> list[int]:
        return [
            m.get_num_common_prefix_blocks(request_id, num_running_requests)
            for m in self.single_type_managers
        ]
