"""The registry of named regressions (harness/regressions/__init__.py)."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.regressions import (  # pyright: ignore[reportPrivateUsage]
    REGRESSIONS,
    Regression,
    _registry,  # pyright: ignore[reportPrivateUsage]
    get_regression,
)


def test_flashinfer_oom_is_registered_with_its_story() -> None:
    regression = get_regression("flashinfer-oom")
    assert regression.name == "flashinfer-oom"
    assert issubclass(regression.backend, FlashInferBackend)
    assert "2.12 GiB" in regression.doc and "4.50 GiB" in regression.doc
    assert "17483" in regression.doc
    assert set(REGRESSIONS) == {"flashinfer-oom"}


def test_unknown_name_lists_the_available_ones() -> None:
    with pytest.raises(HarnessError, match=r"unknown regression 'x'; available: flashinfer-oom"):
        get_regression("x")


def test_duplicate_names_are_rejected_loudly() -> None:
    regression = get_regression("flashinfer-oom")
    other = Regression("flashinfer-oom", "again", FlashInferBackend, "")
    with pytest.raises(ValueError, match="duplicate regression name 'flashinfer-oom'"):
        _registry(regression, other)
