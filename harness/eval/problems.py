"""Deterministic gsm8k-format problems: a question, a worked answer, and ``#### N`` at the end.

gsm8k cannot be downloaded here; these problems have its shape (two to four steps with
calculator annotations such as ``<<48/2=24>>24``, then ``#### <integer>``), so lm-eval's prompt
template, stop sequences and filters apply unchanged. Each problem is drawn from
``random.Random((seed, split, index))``; the default split sizes are gsm8k's (7,473 / 1,319).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

GSM8K_TRAIN_SIZE = 7473
GSM8K_TEST_SIZE = 1319
SPLIT_SIZES: dict[str, int] = {"train": GSM8K_TRAIN_SIZE, "test": GSM8K_TEST_SIZE}

_NAMES = (
    ("Natalia", "she"), ("Weng", "she"), ("Betty", "she"), ("Julie", "she"), ("James", "he"),
    ("Albert", "he"), ("Mark", "he"), ("Ken", "he"), ("Alexis", "she"), ("Tina", "she"),
    ("Carla", "she"), ("Randy", "he"), ("Joy", "she"), ("Marco", "he"), ("Lisa", "she"),
    ("Tobias", "he"), ("Emma", "she"), ("Samuel", "he"), ("Priya", "she"), ("Diego", "he"),
)  # fmt: skip
_ITEMS = (
    "clips", "cupcakes", "books", "pencils", "stickers", "apples", "cookies", "marbles",
    "candles", "bracelets", "muffins", "postcards", "seashells", "comic books", "balloons",
)  # fmt: skip
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August")
_JOBS = ("babysitting", "tutoring", "dog walking", "gardening", "painting fences")
_GOODS = (("notebooks", "pens"), ("shirts", "hats"), ("apples", "pears"), ("mugs", "plates"))
_THINGS = ("bike", "wallet", "guitar", "tablet", "skateboard", "camera")
_CROPS = (("apple trees", "apples"), ("tomato plants", "tomatoes"), ("orange trees", "oranges"))


@dataclass(frozen=True, slots=True)
class Problem:
    """One gsm8k-format example: the fields lm-eval's gsm8k task reads."""

    question: str
    answer: str
    """Worked solution, one step per line, ending ``#### <final answer>``."""


def _step(a: int, op: str, b: int) -> tuple[str, int]:
    """``"a op b = <<a op b=r>>r"`` and ``r`` (integer arithmetic; division must be exact)."""
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    else:
        assert a % b == 0, (a, b)
        r = a // b
    return f"{a}{op}{b} = <<{a}{op}{b}={r}>>{r}", r


def _solution(lines: list[str], final: int) -> str:
    return "\n".join([*lines, f"#### {final}"])


def _sales(rng: random.Random) -> Problem:
    name, pron = rng.choice(_NAMES)
    item = rng.choice(_ITEMS)
    m1, m2 = rng.sample(_MONTHS, 2)
    first = 2 * rng.randint(6, 60)
    if rng.random() < 0.5:
        how, (expr, second) = "half as many", _step(first, "/", 2)
    else:
        extra = rng.randint(3, 25)
        how, (expr, second) = f"{extra} more", _step(first, "+", extra)
    total_expr, total = _step(first, "+", second)
    question = (
        f"{name} sold {item} to {first} of {_poss(pron)} friends in {m1}, and then {pron} sold "
        f"{how} {item} in {m2}. How many {item} did {name} sell altogether in {m1} and {m2}?"
    )
    lines = [
        f"{name} sold {expr} {item} in {m2}.",
        f"{name} sold {total_expr} {item} altogether in {m1} and {m2}.",
    ]
    return Problem(question, _solution(lines, total))


def _earnings(rng: random.Random) -> Problem:
    name, pron = rng.choice(_NAMES)
    job = rng.choice(_JOBS)
    rate = rng.randint(8, 30)
    hours = rng.randint(2, 9)
    days = rng.randint(2, 6)
    spent = rng.randint(5, rate * hours)
    day_expr, per_day = _step(rate, "*", hours)
    week_expr, week = _step(per_day, "*", days)
    left_expr, left = _step(week, "-", spent)
    question = (
        f"{name} earns ${rate} an hour for {job}. {pron.capitalize()} works {hours} hours a day "
        f"for {days} days this week, and then {pron} spends ${spent} on a present for a friend. "
        f"How much money does {name} have left from this week's {job}?"
    )
    lines = [
        f"{name} earns {day_expr} dollars each day.",
        f"In {days} days {pron} earns {week_expr} dollars.",
        f"After the present, {pron} has {left_expr} dollars left.",
    ]
    return Problem(question, _solution(lines, left))


def _change(rng: random.Random) -> Problem:
    name, pron = rng.choice(_NAMES)
    goods1, goods2 = rng.choice(_GOODS)
    n1, p1 = rng.randint(2, 9), rng.randint(2, 15)
    n2, p2 = rng.randint(2, 9), rng.randint(2, 15)
    cost1_expr, cost1 = _step(n1, "*", p1)
    cost2_expr, cost2 = _step(n2, "*", p2)
    total_expr, total = _step(cost1, "+", cost2)
    bill = next(b for b in (20, 50, 100, 200, 500) if b >= total)
    change_expr, change = _step(bill, "-", total)
    question = (
        f"{name} buys {n1} {goods1} that cost ${p1} each and {n2} {goods2} that cost ${p2} each. "
        f"If {pron} pays with a ${bill} bill, how much change does {pron} get back?"
    )
    lines = [
        f"The {goods1} cost {cost1_expr} dollars.",
        f"The {goods2} cost {cost2_expr} dollars.",
        f"Altogether {pron} spends {total_expr} dollars.",
        f"So {pron} gets {change_expr} dollars in change.",
    ]
    return Problem(question, _solution(lines, change))


def _saving(rng: random.Random) -> Problem:
    name, pron = rng.choice(_NAMES)
    thing = rng.choice(_THINGS)
    cost = 2 * rng.randint(25, 150)
    gift = rng.randint(5, cost // 8)
    have_expr, have = _step(cost, "/", 2)
    grand_expr, grand = _step(gift, "*", 2)
    need_expr, need = _step(have - gift, "-", grand)
    question = (
        f"{name} is saving money for a new {thing} which costs ${cost}. {pron.capitalize()} has "
        f"only half of the money {pron} needs. {_poss(pron).capitalize()} parents decided to "
        f"give {_obj(pron)} ${gift} for that purpose, and {_poss(pron)} grandparents twice as "
        f"much as {_poss(pron)} parents. How much more money does {name} need to buy the {thing}?"
    )
    lines = [
        f"In the beginning, {name} has only {have_expr} dollars.",
        f"{name}'s grandparents gave {_obj(pron)} {grand_expr} dollars.",
        f"This means, {name} needs {cost}-{have}-{gift} = <<{cost}-{have}-{gift}={have - gift}>>"
        f"{have - gift} dollars before the grandparents' gift, so {need_expr} dollars more.",
    ]
    return Problem(question, _solution(lines, need))


def _reading(rng: random.Random) -> Problem:
    name, pron = rng.choice(_NAMES)
    yesterday = rng.randint(5, 30)
    today_expr, today = _step(yesterday, "*", 2)
    read_expr, read = _step(yesterday, "+", today)
    remaining = 2 * rng.randint(10, 120)
    pages = read + remaining
    left_expr, left = _step(pages, "-", read)
    half_expr, half = _step(left, "/", 2)
    question = (
        f"{name} is reading a {pages}-page book. Yesterday, {pron} was able to read {yesterday} "
        f"pages and today, {pron} read twice as many pages as yesterday. If {pron} wants to "
        f"read half of the remaining pages tomorrow, how many pages should {pron} read?"
    )
    lines = [
        f"{name} read {today_expr} pages today.",
        f"So {pron} was able to read a total of {read_expr} pages since yesterday.",
        f"There are {left_expr} pages left to be read.",
        f"Since {pron} wants to read half of the remaining pages tomorrow, {pron} should read "
        f"{half_expr} pages.",
    ]
    return Problem(question, _solution(lines, half))


def _harvest(rng: random.Random) -> Problem:
    plants, produce = rng.choice(_CROPS)
    rows, per_row, each = rng.randint(3, 12), rng.randint(4, 15), rng.randint(5, 40)
    box = rng.choice((2, 4, 5, 10))
    plants_expr, num_plants = _step(rows, "*", per_row)
    total_expr, total = _step(num_plants, "*", each)
    total -= total % box
    boxes_expr, boxes = _step(total, "/", box)
    question = (
        f"A farm has {rows} rows of {plants} with {per_row} in each row. Each one gives "
        f"{each} {produce} this season. The farmer packs {total} of the {produce} into boxes "
        f"of {box} and keeps the rest. How many boxes does the farmer fill?"
    )
    lines = [
        f"There are {plants_expr} {plants} on the farm.",
        f"They give {total_expr} {produce}.",
        f"The farmer fills {boxes_expr} boxes.",
    ]
    return Problem(question, _solution(lines, boxes))


def _sprints(rng: random.Random) -> Problem:
    name, pron = rng.choice(_NAMES)
    sprints, times, meters = rng.randint(2, 8), rng.randint(2, 7), 10 * rng.randint(3, 30)
    per_week_expr, per_week = _step(sprints, "*", times)
    meters_expr, total = _step(per_week, "*", meters)
    question = (
        f"{name} decides to run {sprints} sprints {times} times a week. {pron.capitalize()} runs "
        f"{meters} meters each sprint. How many total meters does {pron} run a week?"
    )
    lines = [
        f"{pron.capitalize()} sprints {per_week_expr} times a week.",
        f"So {pron} runs {meters_expr} meters a week.",
    ]
    return Problem(question, _solution(lines, total))


def _discount(rng: random.Random) -> Problem:
    name, pron = rng.choice(_NAMES)
    thing = rng.choice(_THINGS)
    percent = rng.choice((10, 20, 25, 50))
    price = rng.randint(2, 40) * (100 // math.gcd(percent, 100))
    count = rng.randint(2, 5)
    off = price * percent // 100
    sale_expr, sale = _step(price, "-", off)
    total_expr, total = _step(sale, "*", count)
    question = (
        f"A {thing} costs ${price}. During a sale, the price is reduced by {percent}%. "
        f"{name} buys {count} of them for {_poss(pron)} club. How much does {pron} spend?"
    )
    lines = [
        f"The discount is {price}*{percent}/100 = <<{price}*{percent}/100={off}>>{off} dollars.",
        f"So each {thing} costs {sale_expr} dollars.",
        f"{name} spends {total_expr} dollars.",
    ]
    return Problem(question, _solution(lines, total))


def _poss(pron: str) -> str:
    return "her" if pron == "she" else "his"


def _obj(pron: str) -> str:
    return "her" if pron == "she" else "him"


TEMPLATES: tuple[Callable[[random.Random], Problem], ...] = (
    _sales,
    _earnings,
    _change,
    _saving,
    _reading,
    _harvest,
    _sprints,
    _discount,
)
"""Every problem template; each draws its names and numbers from the generator it is given."""


def make_problem(seed: int, split: str, index: int) -> Problem:
    """Problem ``index`` of ``split`` for ``seed``: the same on every machine."""
    rng = random.Random(f"gsm8k-format:{seed}:{split}:{index}")
    return rng.choice(TEMPLATES)(rng)


def make_split(seed: int, split: str, size: int | None = None) -> list[Problem]:
    """The first ``size`` problems of ``split`` (default: gsm8k's size of that split)."""
    count = SPLIT_SIZES[split] if size is None else size
    return [make_problem(seed, split, i) for i in range(count)]
