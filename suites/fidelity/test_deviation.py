"""Named deviations: what they set aside, what they never hide, and the listing by version."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.fidelity import deviation as deviation_module
from harness.fidelity.deviation import Deviation, FoundDeviation, set_aside
from harness.fidelity.differential import Differential, modules, run_differential
from harness.vllm_tree.tree import Location

HERE = Location("vllm/v1/thing.py", 7)


def _at_line_7(tree: object) -> Location:
    return HERE


RENAMED = Deviation("renamed", "renamed b", _at_line_7, paths=("rows.*.b",))
ONLY_RAISES = Deviation(
    "raises", "raises more", _at_line_7, paths=("merge",), explains=lambda v, r: "raises" in v
)


def test_explained_differences_are_set_aside_and_counted() -> None:
    vllm = {"rows": [{"a": 1, "b": 2}, {"a": 2, "b": 3}], "merge": {"raises": "X"}}
    ours = {"rows": [{"a": 1, "b": 9}, {"a": 2}], "merge": {"k": 1}}
    theirs, mine, shown = set_aside(vllm, ours, [RENAMED, ONLY_RAISES])
    assert theirs == mine == {"rows": [{"a": 1}, {"a": 2}]}
    assert shown == {"renamed", "raises"}
    assert vllm["rows"][0]["b"] == 2  # the outcomes themselves are left alone


def test_a_difference_the_deviation_does_not_explain_stays() -> None:
    vllm = {"merge": {"k": 2}, "rows": [{"a": 1, "b": 2}]}
    ours = {"merge": {"k": 1}, "rows": [{"a": 5, "b": 2}]}
    theirs, mine, shown = set_aside(vllm, ours, [RENAMED, ONLY_RAISES])
    assert theirs == vllm and mine == ours and not shown  # equal b: nothing to explain


def _differential(reference: Any, *deviations: Deviation) -> Differential[list[int]]:
    def shrink(xs: list[int]) -> Iterator[list[int]]:
        yield from (xs[:i] + xs[i + 1 :] for i in range(len(xs)))

    return Differential(
        name="rows",
        description="rows",
        vllm_code="rows",
        vllm_modules=modules(),
        generate=lambda rng: [int(x) for x in rng.integers(0, 9, int(rng.integers(1, 6)))],
        run_vllm=lambda vllm, xs: {"rows": [{"a": x, "b": x + 1} for x in xs]},
        run_reference=reference,
        shrink=shrink,
        deviations=deviations,
    )


def _found(d: Deviation, version: str = "9.9.9") -> FoundDeviation:
    return FoundDeviation("rows", d, HERE, version)


def _renamed_b(xs: list[int]) -> object:
    return {"rows": [{"a": x, "b": -x} for x in xs]}


def test_a_listed_deviation_is_agreement_beyond_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(deviation_module.LISTED, "9.9.9", frozenset({"rows/renamed"}))
    result = run_differential(
        _differential(_renamed_b, RENAMED), None, seed=0, trials=30, deviations=[_found(RENAMED)]
    )
    assert result.ok and result.agreed == 30 and result.explained == {"renamed": 30}
    assert _found(RENAMED).describe() == "vLLM 9.9.9 renamed b in vllm/v1/thing.py:7 [rows/renamed]"


def test_an_unlisted_deviation_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(deviation_module.LISTED, "9.9.9", frozenset())
    result = run_differential(
        _differential(_renamed_b, RENAMED), None, seed=0, trials=30, deviations=[_found(RENAMED)]
    )
    assert result.agreed == 30 and not result.ok and result.unlisted


def test_an_unnamed_difference_beside_a_named_one_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(deviation_module.LISTED, "9.9.9", frozenset({"rows/renamed"}))

    def also_a_wrong(xs: list[int]) -> object:
        return {"rows": [{"a": x + (x == 4), "b": -x} for x in xs]}

    result = run_differential(
        _differential(also_a_wrong, RENAMED), None, seed=0, trials=40, deviations=[_found(RENAMED)]
    )
    assert not result.ok and result.disagreement is not None
    assert result.disagreement.input == "[4]"
    assert result.disagreement.difference == ".rows[0].a: vLLM 4 != reference 5"


def test_a_deviation_the_tree_lacks_sets_nothing_aside() -> None:
    result = run_differential(_differential(_renamed_b, RENAMED), None, seed=0, trials=20)
    assert not result.ok and result.disagreement is not None  # RENAMED not found: not used
    assert ".b" in result.disagreement.difference
