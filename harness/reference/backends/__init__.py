"""Attention backends by name: a plain dict, filled explicitly here (never by import side effects).

``get_attn_backend("FLASHINFER")`` returns the backend class; the names are vLLM's ``_Backend``
names.
"""

from __future__ import annotations

from harness.errors import HarnessError
from harness.reference.backends.abstract import AttentionBackend
from harness.reference.backends.flash_attn import FlashAttentionBackend
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.reference.backends.mla.common import MLACommonBackend
from harness.reference.backends.mla.flashmla import FlashMLABackend
from harness.reference.backends.mla.rocm_aiter_mla import AiterMLABackend
from harness.reference.config import lookup

_BACKENDS: dict[str, type[AttentionBackend]] = {}


def register_backend(name: str, backend_cls: type[AttentionBackend]) -> None:
    """Add ``backend_cls`` under ``name``; a name already taken raises."""
    if name in _BACKENDS:
        raise HarnessError(
            f"attention backend {name!r} is already registered "
            f"({_BACKENDS[name].__qualname__}); refusing to replace it with "
            f"{backend_cls.__qualname__}"
        )
    _BACKENDS[name] = backend_cls


def get_attn_backend(name: str) -> type[AttentionBackend]:
    """The backend called ``name``; an unknown name lists the available ones."""
    return lookup(_BACKENDS, name, "attention backend")


def available_backends() -> list[str]:
    """Registered backend names, sorted."""
    return sorted(_BACKENDS)


register_backend("FLASH_ATTN", FlashAttentionBackend)
register_backend("FLASHINFER", FlashInferBackend)
register_backend("TRITON_MLA", MLACommonBackend)
register_backend("FLASHMLA", FlashMLABackend)
register_backend("ROCM_AITER_MLA", AiterMLABackend)
