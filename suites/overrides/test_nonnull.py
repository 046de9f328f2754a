"""nonnull: a local no ``None`` can reach, deciding ``name is None`` for one subclass."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.overrides.checker import CheckOptions, check
from harness.overrides.evidence.nonnull import is_none
from harness.overrides.findings import Finding, Severity

UPDATERS = """\
class WeightUpdaterBase:
    def all_worker_ids(self):
        return None

    def push_weights(self, weights, worker_ids=None):
        if isinstance(worker_ids, int):
            worker_ids = [worker_ids]
        elif worker_ids is None:
            worker_ids = self.all_worker_ids()
        if worker_ids is None:
            self._sync_weights_with_worker(server_weights=weights)
            return
        for worker in worker_ids:
            self._sync_weights_with_worker(worker_id=worker, server_weights=weights)

    def _sync_weights_with_worker(self, *, worker_id=None, server_weights=None): ...


class MultiProcessedWeightUpdater(WeightUpdaterBase):
    def all_worker_ids(self):
        return list(self._policy_weights)

    def _sync_weights_with_worker(self, worker_id, server_weights): ...
"""


def _findings(tmp_path: Path, source: str) -> list[Finding]:
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    result = check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path)))
    return result.findings


@pytest.mark.parametrize(
    ("test", "value", "names"),
    [
        ("ids is None", True, ["ids"]),
        ("ids is not None", False, ["ids"]),
        ("ids is None", False, []),
        ("not ids", True, []),
        ("ids is None and flag", True, ["ids"]),
    ],
)
def test_which_locals_a_condition_needs_to_be_none(
    test: str, value: bool, names: list[str]
) -> None:
    assert is_none(ast.parse(test, mode="eval").body, value) == names


def test_a_local_every_value_of_which_is_a_list_is_never_none(tmp_path: Path) -> None:
    # As torchrl 0.14.1's WeightUpdaterBase.push_weights and MultiProcessedWeightUpdater.
    (finding,) = _findings(tmp_path, UPDATERS)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.unreached == (
        "it runs only if worker_ids is None (at m.py:11), but worker_ids is never None there "
        "for MultiProcessedWeightUpdater (MultiProcessedWeightUpdater.all_worker_ids() never "
        "returns None)"
    )


def test_an_early_exit_on_none_is_read(tmp_path: Path) -> None:
    source = UPDATERS.replace(
        "        if isinstance(worker_ids, int):\n",
        "        if worker_ids is None:\n            return\n        if isinstance(worker_ids, int):\n",
    ).replace("        return list(self._policy_weights)\n", "        return self._ids\n")
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.WARNING


@pytest.mark.parametrize(
    "change",
    [
        # the subclass's ids may be None
        ("        return list(self._policy_weights)\n", "        return self._ids\n"),
        # the local is rebound by something unknown
        (
            "        if worker_ids is None:\n            self._sync",
            "        worker_ids = fetch()\n        if worker_ids is None:\n            self._sync",
        ),
        # a loop rebinds it
        (
            "        if worker_ids is None:\n            self._sync",
            "        for worker_ids in ():\n            pass\n        if worker_ids is None:\n            self._sync",
        ),
        # None passes the first test unchanged
        ("        elif worker_ids is None:\n", "        elif worker_ids == 0:\n"),
    ],
)
def test_the_error_stays_when_none_may_reach_the_test(
    tmp_path: Path, change: tuple[str, str]
) -> None:
    source = UPDATERS.replace(*change)
    assert source != UPDATERS
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.ERROR
