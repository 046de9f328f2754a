"""nones: a local bound to a ``self`` method's result that is ``None`` for one subclass."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness.overrides.checker import CheckOptions, check
from harness.overrides.evidence.nones import not_none
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
