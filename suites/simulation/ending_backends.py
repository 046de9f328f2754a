"""User backends whose builder ends the run in each way user code can: ``harness memory`` and
``harness eval`` take them by path (``--regression FILE:CLASS``), so they run in a child."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

from harness.reference.backends.flash_attn import (
    FlashAttentionBackend,
    FlashAttentionMetadata,
    FlashAttentionMetadataBuilder,
)
from harness.reference.common_metadata import CommonAttentionMetadata


def _in_a_thread(target: Callable[[], object]) -> None:
    worker = threading.Thread(target=target)
    worker.start()
    worker.join()


def _exit_zero() -> None:
    sys.exit(0)


def _os_exit_zero() -> None:
    os._exit(0)


def _raise() -> None:
    raise ValueError("the builder broke")


ENDINGS: dict[str, Callable[[], None]] = {
    "ExitBackend": _exit_zero,
    "OsExitBackend": _os_exit_zero,
    "ThreadExitBackend": lambda: _in_a_thread(_exit_zero),
    "ThreadOsExitBackend": lambda: _in_a_thread(_os_exit_zero),
    "RaisingBackend": _raise,
}
"""Each backend's name, and what its builder does on its first ``build``."""


def _backend(name: str) -> type[FlashAttentionBackend]:
    class Builder(FlashAttentionMetadataBuilder):
        def build(
            self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata
        ) -> FlashAttentionMetadata:
            print(f"{name}'s builder ends the run now", flush=True)
            ENDINGS[name]()
            return super().build(common_prefix_len, common_attn_metadata)

    class Backend(FlashAttentionBackend):
        @staticmethod
        def get_builder_cls() -> type[FlashAttentionMetadataBuilder]:
            return Builder

    Backend.__qualname__ = Backend.__name__ = name
    return Backend


ExitBackend = _backend("ExitBackend")
OsExitBackend = _backend("OsExitBackend")
ThreadExitBackend = _backend("ThreadExitBackend")
ThreadOsExitBackend = _backend("ThreadOsExitBackend")
RaisingBackend = _backend("RaisingBackend")
