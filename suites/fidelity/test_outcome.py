"""Outcomes: exact, dtype-aware views; exceptions by built-in class and joined message."""

from __future__ import annotations

import numpy as np
import torch

from harness.fidelity.outcome import first_difference, normalise
from harness.reference.kv_cache_utils import InsufficientKVCacheMemoryError


def test_tensors_compare_dtype_shape_and_values_not_device() -> None:
    a = normalise(torch.tensor([1, 2], dtype=torch.int32))
    assert a == {"tensor": "int32", "shape": [2], "values": [1, 2]}
    assert first_difference(a, normalise(torch.tensor([1, 2], dtype=torch.int64)))
    assert first_difference(a, normalise(torch.tensor([1, 3], dtype=torch.int32))) == (
        ".values[1]: vLLM 2 != reference 3"
    )
    assert normalise(torch.empty(3, device="meta")) == {"tensor": "float32", "shape": [3]}
    assert normalise(torch.tensor([0.5], dtype=torch.bfloat16))["values"] == [0.5]


def test_numpy_and_python_numbers() -> None:
    assert normalise(np.int32(7)) == 7
    assert normalise(np.zeros(2, np.int32)) == {"array": "int32", "shape": [2], "values": [0, 0]}
    assert first_difference(1, 1.0) is not None  # exact: an int is not a float
    assert first_difference(True, 1) is not None


def test_exceptions_by_builtin_class_and_joined_message() -> None:
    ours = normalise(InsufficientKVCacheMemoryError("No  available\nmemory"))
    theirs = normalise(ValueError("No available", " memory"))  # vLLM's two-argument messages
    assert ours == theirs == {"raises": "ValueError", "message": "No available memory"}


def test_an_empty_vllm_message_accepts_our_explanation_but_not_another_class() -> None:
    bare = normalise(NotImplementedError())
    assert first_difference(bare, normalise(NotImplementedError("page sizes differ"))) is None
    assert first_difference(bare, normalise(ValueError("x")))
    assert first_difference(normalise(NotImplementedError("a")), normalise(NotImplementedError()))


def test_first_difference_names_the_path() -> None:
    assert first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == (
        ".a[1].b: vLLM 2 != reference 3"
    )
    assert "only vLLM has it" in str(first_difference({"x": 1}, {}))
    assert "length 2 (vLLM) != 1 (reference)" in str(first_difference([1, 2], [1]))
