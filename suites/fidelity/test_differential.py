"""The engine on synthetic differentials: counting, determinism, shrinking, broken set-ups."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from harness.fidelity.differential import Differential, modules, run_differential


def _gen(rng: np.random.Generator) -> list[int]:
    return [int(x) for x in rng.integers(0, 100, int(rng.integers(1, 12)))]


def _shrink(xs: list[int]) -> Iterator[list[int]]:
    for i in range(len(xs)):
        yield xs[:i] + xs[i + 1 :]
    for i, x in enumerate(xs):
        if x:
            yield [*xs[:i], x // 2, *xs[i + 1 :]]
            yield [*xs[:i], x - 1, *xs[i + 1 :]]


def _differential(reference: object = sum) -> Differential[list[int]]:
    return Differential(
        name="sum",
        description="sum of a list",
        vllm_code="builtins.sum",
        vllm_modules=modules(),
        generate=_gen,
        run_vllm=lambda vllm, xs: sum(xs),
        run_reference=reference,  # type: ignore[arg-type]
        shrink=_shrink,
    )


def test_agreement_is_counted_per_trial() -> None:
    result = run_differential(_differential(), None, seed=0, trials=50)
    assert (result.agreed, result.trials, result.ok, result.disagreement) == (50, 50, True, None)


def test_a_disagreement_is_shrunk_to_a_minimal_input() -> None:
    def broken_sum(xs: list[int]) -> int:
        return sum(xs) + (1 if any(x >= 40 for x in xs) else 0)

    result = run_differential(_differential(broken_sum), None, seed=0, trials=50)
    assert not result.ok and 0 < result.agreed < 50
    assert result.disagreement is not None
    assert result.disagreement.input == "[40]"  # one element, at the threshold
    assert result.disagreement.difference == "outcome: vLLM 40 != reference 41"


def test_runs_are_deterministic_for_a_seed() -> None:
    def broken(xs: list[int]) -> int:
        return sum(xs) - (len(xs) == 7)

    first = run_differential(_differential(broken), None, seed=3, trials=40)
    again = run_differential(_differential(broken), None, seed=3, trials=40)
    assert first.agreed == again.agreed and first.disagreement == again.disagreement


def test_expected_errors_are_outcomes_that_must_match() -> None:
    def strict(xs: list[int]) -> int:
        if len(xs) > 5:
            raise ValueError("too long")
        return sum(xs)

    result = run_differential(_differential(strict), None, seed=0, trials=30)
    assert result.disagreement is not None and "raises" in result.disagreement.difference


def test_an_unexpected_exception_is_an_error_never_agreement() -> None:
    def broken(xs: list[int]) -> int:
        raise KeyError("set-up bug")

    result = run_differential(_differential(broken), None, seed=0, trials=10)
    assert not result.ok and result.agreed == 0
    assert result.error is not None and "the reference raised KeyError" in result.error


def test_zero_trials_is_not_agreement() -> None:
    assert not run_differential(_differential(), None, seed=0, trials=0).ok
