"""What a drift rule looks at: the nearest base definition and the override."""

from __future__ import annotations

from typing import NamedTuple

from harness.overrides.compare import Issue
from harness.overrides.signature import Signature


class Pair(NamedTuple):
    """A base method and the method overriding it, with the parameter alignment precomputed."""

    base: Signature
    override: Signature
    issues: tuple[Issue, ...]
    """Output of :func:`harness.overrides.compare.align` for this pair."""
    base_is_protocol: bool = False
    """The base method belongs to a ``typing.Protocol`` class."""


def issues_with_code(pair: Pair, code: str) -> list[Issue]:
    """The aligned parameter issues that belong to one rule."""
    return [issue for issue in pair.issues if issue.code == code]
