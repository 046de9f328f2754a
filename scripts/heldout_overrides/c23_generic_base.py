from typing import Generic, TypeVar

T = TypeVar("T")


class Queue(Generic[T]):
    def push(self, item: T, priority: int) -> None:
        return None


class IntQueue(Queue[int]):
    def push(self, item: int) -> None:  # drift
        return None
