"""The backend registry (``harness/reference/backends/__init__.py``)."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.reference.backends import available_backends, get_attn_backend, register_backend
from harness.reference.backends.flashinfer import FlashInferBackend


def test_names_resolve_to_backends_with_vllm_names() -> None:
    assert available_backends() == [
        "FLASHINFER",
        "FLASHMLA",
        "FLASH_ATTN",
        "ROCM_AITER_MLA",
        "TRITON_MLA",
    ]
    for name in available_backends():
        assert get_attn_backend(name).get_name() == f"{name}_VLLM_V1"
    assert get_attn_backend("FLASHINFER") is FlashInferBackend


def test_unknown_name_lists_the_available_ones() -> None:
    with pytest.raises(
        HarnessError, match=r"unknown attention backend 'FLASH'; available: FLASHINFER, FLASHMLA"
    ):
        get_attn_backend("FLASH")


def test_duplicate_registration_is_rejected_loudly() -> None:
    with pytest.raises(HarnessError, match="'FLASHINFER' is already registered"):
        register_backend("FLASHINFER", FlashInferBackend)
    assert get_attn_backend("FLASHINFER") is FlashInferBackend
