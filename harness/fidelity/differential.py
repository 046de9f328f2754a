"""The differential engine: random inputs from a fixed seed, both sides, exact comparison, shrinking.

A :class:`Differential` names the vLLM code it executes, draws an input from a
``numpy.random.Generator``, runs both sides and compares their normalised outcomes. An exception
of one of its ``expected_errors`` types is an outcome (both sides must raise alike); any other
is reported as an error, never as agreement. The first disagreeing input is shrunk greedily.
"""

from __future__ import annotations

import time
import traceback
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from harness.fidelity.outcome import first_difference, normalise

I = TypeVar("I")  # noqa: E741 (the input type)

MAX_SHRINK_EVALUATIONS = 400
"""Candidate inputs tried while shrinking one disagreement."""
DEFAULT_EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    AssertionError,
    NotImplementedError,
)


class DifferentialBroken(Exception):
    """A side raised something the differential does not expect: its set-up is wrong."""


@dataclass(frozen=True)
class Differential(Generic[I]):
    """One comparison of the reference against vLLM's code on random inputs."""

    name: str
    description: str
    vllm_code: str
    """The vLLM code executed (module and function), for the report."""
    vllm_modules: tuple[str, ...]
    """The vLLM modules loaded from source for this differential."""
    generate: Callable[[np.random.Generator], I]
    run_vllm: Callable[[Any, I], object]
    """``run_vllm(vllm, input)``; ``vllm`` is the :class:`~harness.fidelity.vllm.VllmCode`."""
    run_reference: Callable[[I], object]
    shrink: Callable[[I], Iterable[I]]
    show: Callable[[I], str] = repr
    expected_errors: tuple[type[BaseException], ...] = DEFAULT_EXPECTED_ERRORS
    trials: int = 200


@dataclass(frozen=True)
class Disagreement:
    """A (shrunk) input on which the two sides differ."""

    input: str
    difference: str
    vllm: Any
    reference: Any
    shrink_steps: int


@dataclass(frozen=True)
class DifferentialResult:
    """How one differential went: ``agreed`` of ``trials``, or why it could not run."""

    name: str
    description: str
    vllm_code: str
    trials: int
    agreed: int
    seconds: float
    disagreement: Disagreement | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.trials > 0 and self.agreed == self.trials


def _side(differential: Differential[Any], run: Callable[[], object], side: str, shown: str) -> Any:
    try:
        return normalise(run())
    except differential.expected_errors as exc:
        return normalise(exc)
    except Exception as exc:
        detail = "".join(traceback.format_exception(exc)[-3:]).strip()
        raise DifferentialBroken(
            f"{side} raised {type(exc).__name__} on input {shown}: {exc}\n{detail}"
        ) from exc


def evaluate(differential: Differential[I], vllm: Any, case: I) -> tuple[Any, Any, str | None]:
    """Both normalised outcomes for ``case`` and where they differ (None: they agree)."""
    shown = differential.show(case)
    ours = _side(differential, lambda: differential.run_reference(case), "the reference", shown)
    theirs = _side(differential, lambda: differential.run_vllm(vllm, case), "vLLM", shown)
    return theirs, ours, first_difference(theirs, ours)


def _shrink(differential: Differential[I], vllm: Any, case: I) -> tuple[I, int]:
    steps = evaluations = 0
    improved = True
    while improved and evaluations < MAX_SHRINK_EVALUATIONS:
        improved = False
        for candidate in differential.shrink(case):
            evaluations += 1
            if evaluate(differential, vllm, candidate)[2] is not None:
                case, steps, improved = candidate, steps + 1, True
                break
            if evaluations >= MAX_SHRINK_EVALUATIONS:
                break
    return case, steps


def run_differential(
    differential: Differential[I], vllm: Any, *, seed: int, trials: int | None = None
) -> DifferentialResult:
    """Run ``trials`` random inputs (default: the differential's own count) from ``seed``."""
    started = time.perf_counter()
    count = differential.trials if trials is None else trials
    rng = np.random.default_rng([seed, zlib.crc32(differential.name.encode())])
    agreed = 0
    first: I | None = None
    disagreement: Disagreement | None = None
    error: str | None = None
    try:
        for _ in range(count):
            case = differential.generate(rng)
            if evaluate(differential, vllm, case)[2] is None:
                agreed += 1
            elif first is None:
                first = case
        if first is not None:
            shrunk, steps = _shrink(differential, vllm, first)
            theirs, ours, difference = evaluate(differential, vllm, shrunk)
            assert difference is not None
            disagreement = Disagreement(differential.show(shrunk), difference, theirs, ours, steps)
    except DifferentialBroken as exc:
        error = str(exc)
    return DifferentialResult(
        differential.name,
        differential.description,
        differential.vllm_code,
        count,
        agreed,
        time.perf_counter() - started,
        disagreement,
        error,
    )
