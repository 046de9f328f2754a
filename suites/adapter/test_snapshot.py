"""What ``harness diff`` keeps of a builder's metadata: plain values, and nothing that grows with
what the builder holds (a host array the size of the KV cache took gigabytes per run)."""

from __future__ import annotations

import dataclasses
import enum
import json

import numpy as np
import torch

from harness.adapter.snapshot import MAX_ELEMENTS, snapshot


class Mode(enum.Enum):
    FULL = 1


@dataclasses.dataclass
class Metadata:
    table: torch.Tensor
    lens: np.ndarray
    mode: Mode
    scale: float


def test_fields_tensors_and_arrays_become_plain_values() -> None:
    metadata = Metadata(torch.tensor([[1, 2]]), np.array([3, 4]), Mode.FULL, float("inf"))
    metadata.extra = [1, (2, 3)]  # type: ignore[attr-defined]  # set after construction
    assert snapshot(metadata) == {
        "__type__": "Metadata",
        "table": {"dtype": "torch.int64", "shape": [1, 2], "values": [[1, 2]]},
        "lens": {"dtype": "int64", "shape": [2], "values": [3, 4]},
        "mode": "Mode.FULL",
        "scale": "inf",
        "extra": [1, [2, 3]],
    }


def test_large_tensors_arrays_and_lists_keep_their_shape_only() -> None:
    big = MAX_ELEMENTS + 1
    copy = snapshot({"t": torch.zeros(big), "a": np.zeros(big, dtype=np.int8), "l": [0] * big})
    assert copy == {
        "t": {"dtype": "torch.float32", "shape": [big], "values": None},
        "a": {"dtype": "int8", "shape": [big], "values": None},
        "l": {"__type__": "list", "length": big},
    }
    assert len(json.dumps(copy)) < 300
