"""The gsm8k-format generator: deterministic, well-formed, arithmetic that checks out."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pytest

from harness.eval.problems import (
    GSM8K_TEST_SIZE,
    TEMPLATES,
    Problem,
    make_problem,
    make_split,
)

CALC = re.compile(r"<<([^=<>]+)=(-?\d+)>>(-?\d+)")


def _value(expression: str) -> int:
    """Left-to-right integer arithmetic with * and / before + and - (what the templates write)."""
    terms = re.split(r"(?<=\d)([+-])", expression)
    total, sign = 0, 1
    for term in terms:
        if term in "+-":
            sign = 1 if term == "+" else -1
            continue
        factors = re.split(r"([*/])", term)
        value = int(factors[0])
        for op, operand in zip(factors[1::2], factors[2::2], strict=True):
            if op == "*":
                value *= int(operand)
            else:
                assert value % int(operand) == 0, expression
                value //= int(operand)
        total += sign * value
    return total


def test_same_seed_same_problems_different_seed_different() -> None:
    assert make_split(3, "test", 20) == make_split(3, "test", 20)
    assert make_split(3, "test", 20) != make_split(4, "test", 20)
    assert make_split(3, "train", 5) != make_split(3, "test", 5)


def test_a_problem_does_not_depend_on_the_split_size() -> None:
    assert make_split(0, "test", 7)[5] == make_problem(0, "test", 5) == make_split(0, "test")[5]
    assert len(make_split(0, "test")) == GSM8K_TEST_SIZE


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.__name__.strip("_"))
def test_worked_answers_check_out_and_end_with_the_final_number(
    template: Callable[[random.Random], Problem],
) -> None:
    for seed in range(60):
        problem = template(random.Random(seed))
        *steps, last = problem.answer.split("\n")
        assert re.fullmatch(r"#### \d+", last), problem.answer
        calcs = CALC.findall(problem.answer)
        assert calcs and steps, problem.answer
        for expression, result, shown in calcs:
            assert _value(expression) == int(result) == int(shown), problem.answer
        assert int(calcs[-1][1]) == int(last.removeprefix("#### "))
        assert problem.question.endswith("?")
