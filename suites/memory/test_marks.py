"""harness.memory.marks: the memory_budget marker as a pure function."""

from __future__ import annotations

import pytest
import torch

from harness.errors import HarnessError
from harness.memory.allocation import Allocation, SourceLine
from harness.memory.marks import (
    BudgetDevice,
    Measurement,
    compare_with_last_green,
    describe_measurement,
    memory_budget,
    parse_budget_device,
)

CPU = BudgetDevice("cpu")


def _allocation(nbytes: int, line: int) -> Allocation:
    return Allocation(
        op="aten.clone.default",
        nbytes=nbytes,
        shape=(nbytes // 4,),
        dtype=torch.float32,
        device="cpu",
        source=SourceLine(__file__, line),
        region="step 3",
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cpu", BudgetDevice("cpu")),
        ("cuda", BudgetDevice("cuda")),
        ("meta:h100-95", BudgetDevice("meta", "h100-95")),
        ("meta:b200", BudgetDevice("meta", "b200")),
    ],
)
def test_parse_budget_device(text: str, expected: BudgetDevice) -> None:
    assert parse_budget_device(text) == expected
    assert str(expected) == text


@pytest.mark.parametrize("text", ["gpu", "meta", "meta:", "cuda:0", "CPU"])
def test_parse_budget_device_rejects(text: str) -> None:
    with pytest.raises(HarnessError, match="invalid memory_budget device"):
        parse_budget_device(text)


def test_within_budget_returns_none() -> None:
    measured = Measurement(CPU, peak_bytes=1024, method="tracker")
    assert memory_budget("1 KiB", _measurement=measured) is None
    assert memory_budget(1024, "cpu", _measurement=measured) is None


def test_over_budget_gives_one_line_and_a_section_with_the_allocations() -> None:
    top = (_allocation(3000, 23), _allocation(1000, 24))
    measured = Measurement(CPU, 4000, "tracker", top_allocations=top, peak_region="step 3")
    result = memory_budget("2 KiB", _measurement=measured)
    assert result is not None
    assert result.long_repr == (
        "memory budget exceeded on cpu: peak 3.91 KiB (4000 bytes) > budget 2.00 KiB "
        "(2048 bytes) by 1.91 KiB"
    )
    title, text = result.section
    assert title == "memory budget"
    lines = text.splitlines()
    assert lines[0] == "peak 3.91 KiB on cpu (measured by tracker) in region 'step 3'"
    assert lines[1] == "largest allocations live at the peak (top 2):"
    assert lines[2].endswith("test_marks.py:23")
    assert "2.93 KiB  aten.clone.default [750 float32 cpu]" in lines[2]
    assert lines[3].strip() == "return Allocation("
    assert describe_measurement(measured) == text


def test_bad_budget_size_is_a_harness_error() -> None:
    with pytest.raises(HarnessError, match="invalid size"):
        memory_budget("lots", _measurement=Measurement(CPU, 1, "tracker"))


@pytest.mark.parametrize(
    ("peak", "previous", "tolerance", "worse"),
    [
        (100, None, 0.0, False),
        (100, 100, 0.0, False),
        (101, 100, 0.0, True),
        (105, 100, 0.05, False),
        (106, 100, 0.05, True),
        (90, 100, 0.0, False),
    ],
)
def test_compare_with_last_green(
    peak: int, previous: int | None, tolerance: float, worse: bool
) -> None:
    result = compare_with_last_green(peak, previous, tolerance)
    assert (result is not None) == worse
    if result is not None:
        assert result.text.startswith(f"peak {peak} bytes is worse than the last green run's")
        assert f"x{peak / 100:.3f}" in result.text
