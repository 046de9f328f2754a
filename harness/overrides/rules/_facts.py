"""What rules look at (their module's ``SUBJECT``: a :class:`Pair`, a :class:`Sibling`, a
:class:`NoBase` method, a file, a class, an ignore comment) and what they return (:class:`Issue`).
"""

from __future__ import annotations

from typing import NamedTuple

from harness.overrides.compare import Alignment
from harness.overrides.facts.signature import Signature


class Issue(NamedTuple):
    """One problem a rule found, before it becomes a located :class:`Finding`."""

    params: tuple[str, ...] = ()
    """Drifted parameter names (as the base spells them, then new names)."""
    fields: tuple[tuple[str, str], ...] = ()
    """Values for the rule's message template."""
    key: str = ""
    """Baseline key detail of a finding without a class (e.g. the ignore comment's codes)."""


class Pair(NamedTuple):
    """A base method and the method overriding it, with the parameter alignment precomputed."""

    base: Signature
    override: Signature
    alignment: Alignment | None
    """:func:`harness.overrides.compare.align` of the two; ``None`` if not comparable."""
    base_is_protocol: bool = False
    """The base method belongs to a ``typing.Protocol`` class."""


class Sibling(NamedTuple):
    """A method two unrelated bases of a class both define: calls written against ``loser`` dispatch
    to ``winner``, as if it overrode it."""

    winner: Signature
    loser: Signature
    differences: tuple[str, ...]
    """What the method-pair rules report about ``winner`` as an override of ``loser``."""


class NoBase(NamedTuple):
    """A method that no class after its own in the MRO defines."""

    method: Signature
    mro_resolved: bool
    """Every base in the class's MRO was found in the tree (so "no base" is certain)."""
