"""The pool of KV cache block ids shared by every KV cache group (vLLM 0.9.0's ``v1/core/block_pool.py``).

Without prefix caching a block is just an id with a reference count. Block 0 is the null block:
it is never handed out and stands for "no block here" (e.g. a block that slid out of a window).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable


class BlockPool:
    """Free block ids in a FIFO queue, plus a reference count per block."""

    def __init__(self, num_gpu_blocks: int) -> None:
        if num_gpu_blocks < 2:
            raise ValueError(
                f"need at least 2 blocks (one is the null block), got {num_gpu_blocks}"
            )
        self.num_gpu_blocks = num_gpu_blocks
        self.ref_cnt: list[int] = [0] * num_gpu_blocks
        """How many requests hold each block (a list: scalar updates dominate)."""
        self.free_block_queue: deque[int] = deque(range(num_gpu_blocks))
        self.null_block: int = self.free_block_queue.popleft()
        """Block 0, reserved: never allocated, never freed."""

    def get_num_free_blocks(self) -> int:
        return len(self.free_block_queue)

    def get_new_blocks(self, num_blocks: int) -> list[int]:
        """Take ``num_blocks`` ids from the head of the free queue."""
        if num_blocks > len(self.free_block_queue):
            raise ValueError(f"cannot get {num_blocks} free blocks from the pool")
        blocks = [self.free_block_queue.popleft() for _ in range(num_blocks)]
        for block in blocks:
            self.ref_cnt[block] += 1
        return blocks

    def touch(self, blocks: Iterable[int]) -> None:
        """Take one more reference on blocks already held by someone (a prefix-cache hit)."""
        for block in blocks:
            self.ref_cnt[block] += 1

    def free_blocks(self, ordered_blocks: Iterable[int]) -> None:
        """Drop one reference per block; blocks nobody holds go to the tail of the free queue."""
        for block in ordered_blocks:
            if block == self.null_block:
                continue
            self.ref_cnt[block] -= 1
            if self.ref_cnt[block] == 0:
                self.free_block_queue.append(block)
