"""The real vLLM 0.9.0 and 0.34.0 trees: every differential agrees or deviates only as
docs/fidelity.md lists, at the lines it names (integration: the wheels' sources are fetched with
pip into ~/.cache/harness when missing, and a full run takes a minute)."""

from __future__ import annotations

import os

import pytest

from harness.fidelity.deviation import LISTED, find_deviations
from harness.fidelity.differentials import DIFFERENTIALS
from harness.fidelity.report import format_report
from harness.fidelity.suite import run_fidelity
from harness.vllm_tree.fetch import fetch_vllm_source
from harness.vllm_tree.tree import VllmTree, locate_tree

from .test_docs import listed_in_docs

pytestmark = pytest.mark.integration
VERSIONS = ("0.9.0", "0.34.0")


def _tree(version: str) -> VllmTree:
    given = os.environ.get("HARNESS_VLLM_SRC")
    if given and version == "0.9.0":
        return locate_tree(given)
    return fetch_vllm_source(version)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_documented_lines_are_where_the_tree_shows_each_deviation(version: str) -> None:
    tree = _tree(version)
    found = {
        f.key: str(f.location)
        for d in DIFFERENTIALS
        for f in find_deviations(tree, d.name, d.deviations)
    }
    assert found == listed_in_docs()[version]
    assert set(found) == LISTED[version]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_differential_agrees_or_deviates_as_listed(version: str) -> None:
    report = run_fidelity(_tree(version), DIFFERENTIALS, seed=0)
    assert report.ok, format_report(report)
    compared = [r for r in report.results if r.compared]
    assert compared and all(r.agreed == r.trials > 0 for r in compared)
    if version == "0.9.0":
        assert all(not r.deviations for r in report.results)
    assert "cannot read" not in format_report(report)
