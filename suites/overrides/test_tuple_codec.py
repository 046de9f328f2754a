"""positional: NamedTuples to plain tuples and back, derived from their fields."""

from __future__ import annotations

import enum
import marshal
from typing import NamedTuple

import pytest

from harness.overrides.facts.tuple_codec import compile_codec


class Colour(enum.IntEnum):
    RED = 1
    BLUE = 2


class Leaf(NamedTuple):
    name: str
    colour: Colour
    note: str | None = None


class Node(NamedTuple):
    leaves: tuple[Leaf, ...]
    tags: frozenset[str]
    pairs: tuple[tuple[str, int], ...]
    first: Leaf


class Plain(NamedTuple):
    a: int
    b: tuple[str, ...]


NODE = Node(
    (Leaf("x", Colour.RED), Leaf("y", Colour.BLUE, "n")),
    frozenset({"b", "a"}),
    (("p", 1),),
    Leaf("z", Colour.BLUE),
)


def test_round_trip_rebuilds_the_types_exactly() -> None:
    encode, decode = compile_codec(Node)
    raw = encode(NODE)
    assert raw == ((("x", 1, None), ("y", 2, "n")), ("a", "b"), (("p", 1),), ("z", 2, None))
    back = decode(marshal.loads(marshal.dumps(raw)))  # builtins only: marshal takes it
    assert back == NODE
    assert type(back) is Node and type(back.first) is Leaf
    assert type(back.leaves[1].colour) is Colour and type(back.tags) is frozenset


def test_a_tuple_of_namedtuples_and_a_plain_one() -> None:
    encode, decode = compile_codec(tuple[Plain, ...])
    raw = encode((Plain(1, ("a",)),))
    assert raw == ((1, ("a",)),) and type(raw[0]) is tuple
    assert decode(raw) == (Plain(1, ("a",)),) and type(decode(raw)[0]) is Plain


def test_a_row_of_the_wrong_length_raises() -> None:
    _, decode = compile_codec(tuple[Leaf, ...])
    with pytest.raises(ValueError):
        decode((("x", 1),))
    _, decode_node = compile_codec(Node)
    with pytest.raises(ValueError):
        decode_node(((), (), ()))


def test_an_unknown_enum_value_raises() -> None:
    _, decode = compile_codec(Leaf)
    with pytest.raises(KeyError):
        decode(("x", 9, None))


def test_a_field_type_it_cannot_encode_is_refused_when_compiled() -> None:
    class Odd(NamedTuple):
        values: list[int]

    with pytest.raises(TypeError, match="no encoding for field type"):
        compile_codec(Odd)
