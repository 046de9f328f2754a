"""A file the running parser rejects says which Python version its syntax needs."""

from __future__ import annotations

import pytest

from harness.overrides.facts.grammar import newer_syntax, scan

CASES = [
    ("def first[T](items: list[T]) -> T: ...\n", (3, 12), "PEP 695 type parameter list"),
    ("class Box[T]:\n    pass\n", (3, 12), "PEP 695 type parameter list"),
    ("type Pair = tuple[int, int]\n", (3, 12), "PEP 695 type alias statement"),
    ("class Box[T = int]:\n    pass\n", (3, 13), "PEP 696 type parameter default"),
    ('name = f"{row["name"]}"\n', (3, 12), "PEP 701 f-string syntax"),
    ("try:\n    pass\nexcept* ValueError:\n    pass\n", (3, 11), "PEP 654 except* clause"),
    ("try:\n    pass\nexcept A, B:\n    pass\n", (3, 14), "PEP 758 except without parentheses"),
    ('greeting = t"hello {name}"\n', (3, 14), "PEP 750 template string"),
    ("value = table[*index]\n", (3, 11), "PEP 646 star expression in a subscript"),
]


@pytest.mark.parametrize(("source", "version", "feature"), CASES)
def test_each_newer_construct_is_named_with_its_version(
    source: str, version: tuple[int, int], feature: str
) -> None:
    found = newer_syntax(source, running=(3, 10))
    assert found is not None
    assert (found.version, found.feature) == (version, feature)


def test_the_newest_construct_decides_and_its_line_is_given() -> None:
    source = "type A = int\n\nclass Box[T = int]:\n    pass\n"
    found = newer_syntax(source, running=(3, 11))
    assert found is not None
    assert (found.version, found.line) == ((3, 13), 3)
    assert found.describe(running=(3, 11)).startswith(
        "needs Python 3.13 or later (PEP 696 type parameter default, line 3); "
        "the checker runs on Python 3.11"
    )


def test_constructs_the_running_parser_reads_are_not_blamed() -> None:
    assert newer_syntax("try:\n    pass\nexcept* E:\n    pass\n", running=(3, 11)) is None


@pytest.mark.parametrize(
    "source",
    [
        "def broken(:\n    pass\n",
        "x = type(y)\ntype = 3\n",
        "except_ = 1\nrows[index] = f'{x}' + f\"{{literal}}\"\n",
        "try:\n    pass\nexcept (A, B) as e:\n    pass\n",
        "t = 1\nprint(t, 'x')\n",
    ],
)
def test_ordinary_code_and_ordinary_syntax_errors_name_no_version(source: str) -> None:
    assert scan(source) == []


def test_untokenizable_text_does_not_raise() -> None:
    assert newer_syntax('x = """never closed\n', running=(3, 10)) is None
