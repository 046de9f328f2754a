"""The differential engine: random inputs from a fixed seed, both sides, exact comparison, shrinking.

A :class:`Differential` names the vLLM code it executes, draws an input from a
``numpy.random.Generator``, runs both sides and compares their normalised outcomes. An exception
of one of its ``expected_errors`` types is an outcome (both sides must raise alike); any other
is reported as an error, never as agreement. Differences that a named deviation the tree has
explains are set aside and counted (:mod:`harness.fidelity.deviation`); the first remaining
disagreement is shrunk greedily.
"""

from __future__ import annotations

import time
import traceback
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

from harness.errors import HarnessError
from harness.fidelity.deviation import Deviation, FoundDeviation, set_aside
from harness.fidelity.outcome import first_difference, normalise
from harness.vllm_tree.tree import VllmTree

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
    """The vLLM code executed (classes and functions), for the report."""
    vllm_modules: Callable[[VllmTree], tuple[str, ...]]
    """The vLLM modules this differential loads from source, found in the tree."""
    generate: Callable[[np.random.Generator], I]
    run_vllm: Callable[[Any, I], object]
    """``run_vllm(vllm, input)``; ``vllm`` is the :class:`~harness.fidelity.vllm.VllmCode`."""
    run_reference: Callable[[I], object]
    shrink: Callable[[I], Iterable[I]]
    show: Callable[[I], str] = repr
    expected_errors: tuple[type[BaseException], ...] = DEFAULT_EXPECTED_ERRORS
    trials: int = 200
    deviations: tuple[Deviation, ...] = ()
    """Changes of later vLLM that the reference does not follow, each found in a tree by
    structure (none in vLLM 0.9.0)."""
    prepare: Callable[[Any, I], I] | None = None
    """``prepare(vllm, input)``: the input as the tree's engine hands it to the compared code
    (e.g. vLLM 0.34.0's runner sorts a batch before its builders see it); both sides get it."""

    def prepared(self, vllm: Any, case: I) -> I:
        """``case`` after :attr:`prepare` (itself when there is none)."""
        return case if self.prepare is None else self.prepare(vllm, case)


def modules(*names: str) -> Callable[[VllmTree], tuple[str, ...]]:
    """``vllm_modules`` for modules that do not move: these names in any tree."""
    return lambda tree: names


def modules_defining(
    *names: str, optional: tuple[str, ...] = ()
) -> Callable[[VllmTree], tuple[str, ...]]:
    """``vllm_modules`` for code that moves: the modules of the tree that define ``names``
    (classes or functions; a tree that defines one nowhere is a clear error), and those that
    define ``optional`` names where the tree has them."""

    def find(tree: VllmTree) -> tuple[str, ...]:
        found: list[str] = []
        for name in (*names, *optional):
            module = tree.module_defining(name)
            if module is None and name in optional:
                continue
            if module is None:
                raise HarnessError(
                    f"{tree.root} (vLLM {tree.version}) defines no {name}, which the "
                    "differential runs; a deviation that names its removal is missing"
                )
            found.append(module)
        return tuple(dict.fromkeys(found))

    return find


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
    deviations: tuple[FoundDeviation, ...] = ()
    """The named deviations the tree has for this differential."""
    explained: Mapping[str, int] = field(default_factory=dict[str, int])
    """Deviation name -> trials in which it explained a difference."""
    modules: tuple[str, ...] = ()
    """The vLLM modules loaded for it."""

    @property
    def compared(self) -> bool:
        """False when a deviation leaves nothing to compare (the differential did not run)."""
        return not any(f.deviation.paths is None for f in self.deviations)

    @property
    def unlisted(self) -> list[FoundDeviation]:
        """Deviations found that docs/fidelity.md does not list for this version."""
        return [f for f in self.deviations if not f.listed]

    @property
    def ok(self) -> bool:
        """Agreement on every trial (or nothing to compare), and only listed deviations."""
        if self.unlisted or self.error is not None:
            return False
        return not self.compared or (self.trials > 0 and self.agreed == self.trials)


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


@dataclass(frozen=True)
class Evaluation:
    """Both normalised outcomes of one input, less what named deviations explain."""

    vllm: Any
    reference: Any
    difference: str | None
    """Where they first differ beyond the deviations (None: they agree)."""
    explained: frozenset[str]
    """The deviations that explained a difference."""


def evaluate(
    differential: Differential[I], vllm: Any, case: I, deviations: Sequence[Deviation] = ()
) -> Evaluation:
    """Both sides on ``case`` (prepared), compared beyond what ``deviations`` explain."""
    case = differential.prepared(vllm, case)
    shown = differential.show(case)
    ours = _side(differential, lambda: differential.run_reference(case), "the reference", shown)
    theirs = _side(differential, lambda: differential.run_vllm(vllm, case), "vLLM", shown)
    theirs, ours, explained = set_aside(theirs, ours, deviations)
    return Evaluation(theirs, ours, first_difference(theirs, ours), frozenset(explained))


def _shrink(
    differential: Differential[I], vllm: Any, case: I, deviations: Sequence[Deviation]
) -> tuple[I, int]:
    steps = evaluations = 0
    improved = True
    while improved and evaluations < MAX_SHRINK_EVALUATIONS:
        improved = False
        for candidate in differential.shrink(case):
            evaluations += 1
            if evaluate(differential, vllm, candidate, deviations).difference is not None:
                case, steps, improved = candidate, steps + 1, True
                break
            if evaluations >= MAX_SHRINK_EVALUATIONS:
                break
    return case, steps


def run_differential(
    differential: Differential[I],
    vllm: Any,
    *,
    seed: int,
    trials: int | None = None,
    deviations: Sequence[FoundDeviation] = (),
) -> DifferentialResult:
    """Run ``trials`` random inputs (default: the differential's own count) from ``seed``,
    setting aside the differences that the tree's ``deviations`` explain."""
    started = time.perf_counter()
    count = differential.trials if trials is None else trials
    rng = np.random.default_rng([seed, zlib.crc32(differential.name.encode())])
    named = [f.deviation for f in deviations]
    agreed = 0
    explained: dict[str, int] = {}
    first: I | None = None
    disagreement: Disagreement | None = None
    error: str | None = None
    try:
        for _ in range(count):
            case = differential.generate(rng)
            outcome = evaluate(differential, vllm, case, named)
            for name in outcome.explained:
                explained[name] = explained.get(name, 0) + 1
            if outcome.difference is None:
                agreed += 1
            elif first is None:
                first = case
        if first is not None:
            shrunk, steps = _shrink(differential, vllm, first, named)
            outcome = evaluate(differential, vllm, shrunk, named)
            assert outcome.difference is not None
            disagreement = Disagreement(
                differential.show(differential.prepared(vllm, shrunk)),
                outcome.difference,
                outcome.vllm,
                outcome.reference,
                steps,
            )  # fmt: skip
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
        tuple(deviations),
        explained,
    )
