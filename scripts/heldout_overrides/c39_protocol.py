from typing import Protocol


class Allocator(Protocol):
    def allocate(self, num_bytes: int) -> int: ...


class PoolAllocator(Allocator):
    def allocate(self, size: int) -> int:  # drift
        return size
