"""What rules look at and what they return.

A rule inspects one kind of fact (its module's ``SUBJECT``): a :class:`Pair` of a base method
and its override, a :class:`Sibling` pair that multiple inheritance puts in the same MRO, a
:class:`NoBase` method, a file that cannot be parsed or read, a class
whose MRO is broken, an ignore comment. It returns :class:`Issue` objects; the analysis turns
them into located findings with the rule's code and message.
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
    """A method two unrelated bases of a class both define, the class's MRO picking one.

    For an instance of the class, calls written against ``loser`` (in methods of the base
    that defines it) dispatch to ``winner``, as if ``winner`` overrode it.
    """

    winner: Signature
    loser: Signature
    differences: tuple[str, ...]
    """What the method-pair rules report about ``winner`` as an override of ``loser``."""


class NoBase(NamedTuple):
    """A method that no class after its own in the MRO defines."""

    method: Signature
    mro_resolved: bool
    """Every base in the class's MRO was found in the tree (so "no base" is certain)."""
