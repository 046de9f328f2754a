"""nones: a local whose ``None``-ness at a test is decided for one subclass: never ``None``
(every value reaching it is not), or always (a ``self`` method returns ``None`` for it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.overrides.checker import CheckOptions, check
from harness.overrides.evidence.nones import is_none, not_none
from harness.overrides.findings import Finding, Severity


@pytest.mark.parametrize(
    ("test", "value", "names"),
    [
        ("stream is None", False, ["stream"]),
        ("stream is not None", True, ["stream"]),
        ("stream", True, ["stream"]),
        ("not stream", False, ["stream"]),
        ("stream is None", True, []),
        ("a is not None and b", True, ["a", "b"]),
        ("a is None or b is None", False, ["a", "b"]),
        ("a is None or b is None", True, []),
    ],
)
def test_which_locals_a_condition_needs_to_hold_a_value(
    test: str, value: bool, names: list[str]
) -> None:
    assert not_none(ast.parse(test, mode="eval").body, value) == names


STAGES = """\
class DecodingStage:
    def _encode_while_decoding(self, batch):
        \"\"\"An encoder, when the frames may be streamed.\"\"\"
        if type(self).decode is not DecodingStage.decode or not batch:
            return None
        return Encoder(batch)

    def forward(self, batch):
        stream = self._encode_while_decoding(batch)
        if stream is None:
            return self.decode(batch)
        return self.decode(batch, on_frames=stream)

    def decode(self, latents, on_frames=None):
        return latents


class Encoder:
    def __init__(self, batch):
        self.batch = batch


class MingStage(DecodingStage):
    def decode(self, latents):
        return super().decode(latents)
"""


def _findings(tmp_path: Path, source: str) -> list[Finding]:
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    return check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path))).findings


def test_a_helper_that_returns_none_for_the_subclass_first_decides_the_branch(
    tmp_path: Path,
) -> None:
    # As sglang 0.5.23's DecodingStage._encode_while_decoding and its model-specific stages.
    (finding,) = _findings(tmp_path, STAGES)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.unreached == (
        "it runs only if not stream is None (at m.py:12), but stream = "
        "self._encode_while_decoding(...) is None for MingStage: "
        "DecodingStage._encode_while_decoding() returns None first when "
        "type(self).decode is not DecodingStage.decode"
    )


@pytest.mark.parametrize(
    "change",
    [
        # the helper tests something else first: nothing decided
        (
            "if type(self).decode is not",
            "if batch is None:\n            return 1\n        if type(self).decode is not",
        ),
        # the identity test holds only for classes keeping the base's decode
        (
            "type(self).decode is not DecodingStage.decode",
            "type(self).decode is DecodingStage.decode",
        ),
        # the local is bound twice
        (
            "        if stream is None:\n",
            "        stream = stream or batch\n        if stream is None:\n",
        ),
    ],
)
def test_the_error_stays_when_the_code_does_not_show_the_local_is_none(
    tmp_path: Path, change: tuple[str, str]
) -> None:
    (finding,) = _findings(tmp_path, STAGES.replace(*change))
    assert finding.severity is Severity.ERROR


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


def test_a_local_bound_to_none_decides_a_test_that_needs_a_value(tmp_path: Path) -> None:
    """The general reading: ``stream = None`` reaches the test alone, as a helper's ``None``
    does."""
    source = STAGES.replace(
        "        stream = self._encode_while_decoding(batch)\n",
        "        stream = None\n",
    )
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.unreached == (
        "it runs only if not stream is None (at m.py:12), but stream is None there for MingStage"
    )


def test_the_else_of_the_test_inside_a_with_is_decided_too(tmp_path: Path) -> None:
    """sglang's shape: the call in the ``else`` of ``if stream is None:``, inside ``with`` and
    ``try``; the test the branch needs is the one decided."""
    source = STAGES.replace(
        "        if stream is None:\n"
        "            return self.decode(batch)\n"
        "        return self.decode(batch, on_frames=stream)\n",
        "        with open(batch):\n"
        "            try:\n"
        "                if stream is None:\n"
        "                    frames = self.decode(batch)\n"
        "                else:\n"
        "                    frames = self.decode(batch, on_frames=stream)\n"
        "            finally:\n"
        "                pass\n"
        "        return frames\n",
    )
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert "stream = self._encode_while_decoding(...) is None for MingStage" in str(
        finding.evidence.unreached
    )
