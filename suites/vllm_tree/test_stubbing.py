"""Automatic stubs: lenient while a tree is imported, refused (and named) once its code runs for
a check; the uses that would answer silently or never end are refused always."""

from __future__ import annotations

import abc
from collections.abc import Generator

import pytest

from harness.vllm_tree.stubbing import LEDGER, StubModule, StubUsed, make_stub_class

NAME = "vllm._custom_ops.get_scheduler_metadata"


@pytest.fixture
def strict() -> Generator[None]:
    LEDGER.strict()
    try:
        yield
    finally:
        LEDGER.is_strict = False


def test_at_import_time_a_stub_may_decorate_be_called_and_read() -> None:
    stub = make_stub_class(NAME)
    assert stub(print) is print  # a stubbed decorator leaves its target alone
    assert isinstance(stub(3), stub) and stub.anything.__qualname__ == f"{NAME}.anything"
    assert (stub == 3) is False and stub != 3  # import time: identity, as Python's default


@pytest.mark.usefixtures("strict")
def test_once_strict_calling_or_reading_a_stub_is_refused_and_named() -> None:
    stub = make_stub_class(NAME)
    with pytest.raises(StubUsed, match=rf"called {NAME}, which is stubbed out here"):
        stub(3)
    with pytest.raises(StubUsed, match=rf"read {NAME}\.field"):
        _ = stub.field
    assert NAME in LEDGER.used


@pytest.mark.parametrize("other", [3, "FLASHINFER", None, 1.0])
def test_once_strict_comparing_a_stub_with_a_value_is_refused(other: object) -> None:
    """A stub compared with == or != answered False/True silently (the fidelity sandbox's gap)."""
    stub = make_stub_class("vllm.envs.VLLM_ATTENTION_BACKEND")
    instance = stub()  # made at import time
    comparisons = (
        lambda: stub == other,
        lambda: stub != other,
        lambda: other == stub,
        lambda: instance == other,
        lambda: other != instance,
    )
    LEDGER.strict()
    try:
        for compare in comparisons:
            with pytest.raises(StubUsed, match=r"used == or != on vllm\.envs\.VLLM_ATTENTION"):
                compare()
    finally:
        LEDGER.is_strict = False


def test_truth_membership_iteration_and_length_are_refused_always() -> None:
    stub = make_stub_class("vllm.envs.VLLM_DISABLED_KERNELS")
    for use in (
        lambda: bool(stub),
        lambda: bool(stub()),
        lambda: "x" in stub,  # went on forever through __getitem__ before
        lambda: list(stub),
        lambda: len(stub),
    ):
        with pytest.raises(StubUsed, match=r"vllm\.envs\.VLLM_DISABLED_KERNELS"):
            use()


@pytest.mark.usefixtures("strict")
def test_a_real_class_with_a_stub_base_is_an_ordinary_class() -> None:
    base = make_stub_class("vllm.model_executor.custom_op.CustomOp")

    class Real(base):  # type: ignore[misc, valid-type]
        def __init__(self, n: int) -> None:
            self.n = n

    class Abstract(abc.ABC):  # noqa: B024 (registered, never subclassed)
        pass

    Abstract.register(Real)
    real = Real(2)
    assert real.n == 2 and bool(real) and bool(Real)
    assert real != Real(2) and real == real and Real == Real and Real != base
    assert isinstance(real, Abstract) and not isinstance(3, Real)


def test_a_stub_module_hands_out_stub_classes_and_its_real_attributes() -> None:
    module = StubModule("vllm.utils", {"cdiv": abs})
    assert module.cdiv is abs
    assert module.missing.__qualname__ == "vllm.utils.missing"
    assert module.missing is module.missing
