"""Pure comparison of a base method's signature with its override's.

:func:`align` says which override parameter receives each argument a caller can pass to the base
(:class:`Link`), and which override parameters no base argument reaches; the rule modules decide
drift from these facts. Each exemption is a small named predicate.
"""

from __future__ import annotations

from typing import NamedTuple

from harness.overrides.facts.signature import MethodKind, Param, ParamKind, Signature

CONSTRUCTOR_HOOKS = frozenset({"__init__", "__new__", "__init_subclass__", "__post_init__"})

POSITIONAL = (ParamKind.POSITIONAL_ONLY, ParamKind.POSITIONAL_OR_KEYWORD)
KEYWORD = (ParamKind.POSITIONAL_OR_KEYWORD, ParamKind.KEYWORD_ONLY)
VARIADIC = (ParamKind.VAR_POSITIONAL, ParamKind.VAR_KEYWORD)


# --- exemptions -------------------------------------------------------------------------


def is_exempt_method(name: str) -> bool:
    """Constructor hooks (called with the subclass's own signature) and name-mangled ``__private``
    methods are never compared."""
    return name in CONSTRUCTOR_HOOKS or (name.startswith("__") and not name.endswith("__"))


def is_operator_dunder(name: str) -> bool:
    """Dunders other than ``__call__`` are called positionally by the interpreter, so their
    parameter names do not matter."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__") and name != "__call__"


def is_dummy(name: str) -> bool:
    """A base parameter named ``_`` or ``_x`` is "unused": nobody passes it by keyword."""
    return name.startswith("_")


def absorbs_everything(sig: Signature) -> bool:
    """An override taking both ``*args`` and ``**kwargs`` accepts any call."""
    kinds = {p.kind for p in sig.params}
    return ParamKind.VAR_POSITIONAL in kinds and ParamKind.VAR_KEYWORD in kinds


def is_catch_all(sig: Signature) -> bool:
    """A base taking only ``*args, **kwargs`` declares no signature to drift from (a dispatch slot
    every override narrows)."""
    explicit = sig.explicit_params()
    return absorbs_everything(sig) and all(p.kind in VARIADIC for p in explicit)


def kind_breaks_callers(base: Signature, override: Signature) -> bool:
    """A class or static method overridden by an instance method breaks ``Class.m(...)`` calls (the
    other direction keeps ``self.m(x)`` working)."""
    return base.kind is not MethodKind.INSTANCE and override.kind is MethodKind.INSTANCE


def comparable(base: Signature, override: Signature) -> bool:
    """Explicit parameters are compared unless kinds break callers, or either side is a
    property, or one side accepts anything."""
    return (
        not kind_breaks_callers(base, override)
        and not base.is_property
        and not override.is_property
        and not absorbs_everything(override)
        and not is_catch_all(base)
    )


def narrows(base: ParamKind, override: ParamKind) -> bool:
    """The override parameter accepts fewer ways of passing than the base one: positional
    callers break on keyword-only, keyword callers on positional-only."""
    positional_lost = base in POSITIONAL and override is ParamKind.KEYWORD_ONLY
    keyword_lost = base is not ParamKind.POSITIONAL_ONLY and override is ParamKind.POSITIONAL_ONLY
    return positional_lost or keyword_lost


# --- alignment ----------------------------------------------------------------------------


class Link(NamedTuple):
    """Where the argument for one base parameter lands in the override."""

    base: Param
    override: Param | None
    """The override parameter that receives it; ``None`` when no named parameter does."""
    moved: bool = False
    """Same name at another position, for a reason other than a removal before it."""

    @property
    def narrowed(self) -> bool:
        """The override parameter takes the argument in fewer ways (see :func:`narrows`)."""
        return self.override is not None and narrows(self.base.kind, self.override.kind)

    @property
    def renamed(self) -> bool:
        """A keyword caller's name no longer reaches it. Positional-only names are not part of
        the interface; a positional ``_x`` is a dummy nobody passes by keyword (a keyword-only
        one can only be passed by keyword, so its name counts)."""
        o = self.override
        if o is None or o.name == self.base.name or self.base.kind is ParamKind.POSITIONAL_ONLY:
            return False
        return self.base.kind is ParamKind.KEYWORD_ONLY or not is_dummy(self.base.name)

    @property
    def lost_default(self) -> bool:
        """The base parameter has a default and the override parameter has none."""
        return self.override is not None and self.base.has_default and not self.override.has_default


class Alignment(NamedTuple):
    """The explicit parameters of both sides and how they correspond."""

    base: tuple[Param, ...]
    """The base's explicit parameters (operands of operator dunders as positional-only)."""
    override: tuple[Param, ...]
    links: tuple[Link, ...]
    """One per named base parameter: positional ones in order, then keyword-only ones."""
    unmatched: tuple[Param, ...]
    """Named override parameters that no base argument reaches, in order."""

    def has(self, side: tuple[Param, ...], kind: ParamKind) -> bool:
        """Whether ``side`` (``self.base`` or ``self.override``) has a parameter of ``kind``."""
        return any(p.kind is kind for p in side)

    def positional(self, side: tuple[Param, ...]) -> list[Param]:
        """The positional parameters of ``side``, in order."""
        return [p for p in side if p.kind in POSITIONAL]


def _positional_view(params: tuple[Param, ...], operator: bool) -> tuple[Param, ...]:
    """Treat operands of operator dunders as positional-only: their names never matter."""
    if not operator:
        return params
    return tuple(
        p._replace(kind=ParamKind.POSITIONAL_ONLY) if p.kind in POSITIONAL else p for p in params
    )


def moved_parameters(base: list[Param], override: list[Param]) -> frozenset[str]:
    """Base positional parameters that land at another position for a reason other than a removal
    before them: ``f(self, a, b)`` -> ``f(self, b, a)`` or ``f(self, a, x, b)``."""
    o_names = [p.name for p in override]
    keyword = [p.name for p in base if p.kind is not ParamKind.POSITIONAL_ONLY]
    shared = [n for n in keyword if n in o_names]
    order_changed = shared != [n for n in o_names if n in shared]
    all_base = {p.name for p in base}
    return frozenset(
        p.name
        for index, p in enumerate(base)
        if p.kind is not ParamKind.POSITIONAL_ONLY
        and p.name in o_names
        and o_names.index(p.name) != index
        and (order_changed or any(n not in all_base for n in o_names[: o_names.index(p.name)]))
    )


def _positional_partner(
    index: int,
    b: Param,
    o_pos: list[Param],
    by_name: dict[str, Param],
    base_names: frozenset[str],
) -> Param | None:
    """The override parameter receiving positional base parameter ``b`` (at ``index``)."""
    at = o_pos[index] if index < len(o_pos) else None
    if at is not None and (at.name == b.name or b.kind is ParamKind.POSITIONAL_ONLY):
        return at  # the same slot (a positional-only name is not part of the interface)
    partner = by_name.get(b.name)
    if partner is not None:
        return partner  # the same name elsewhere
    if at is not None and at.name not in base_names:
        return at  # a new name in the same slot
    return None


def align(base: Signature, override: Signature) -> Alignment | None:
    """How ``override``'s parameters receive the arguments of calls written against ``base``;
    ``None`` when the two are not comparable parameter by parameter (:func:`comparable`)."""
    if not comparable(base, override):
        return None
    operator = is_operator_dunder(base.name)
    b_params = _positional_view(base.explicit_params(), operator)
    o_params = _positional_view(override.explicit_params(), operator)
    by_name = {p.name: p for p in o_params if p.kind in KEYWORD}
    base_names = frozenset(p.name for p in b_params)
    b_pos = [p for p in b_params if p.kind in POSITIONAL]
    o_pos = [p for p in o_params if p.kind in POSITIONAL]
    moved = moved_parameters(b_pos, o_pos)
    matched: set[str] = set()
    links: list[Link] = []
    for index, b in enumerate(b_pos):
        partner = _positional_partner(index, b, o_pos, by_name, base_names)
        if partner is not None:
            matched.add(partner.name)
        same_name = partner is not None and partner.name == b.name
        links.append(Link(b, partner, moved=same_name and b.name in moved))
    # Keyword-only base parameters: the same name, else the next new keyword-only name. An
    # override with **kwargs receives an unknown keyword there instead (no rename to pair).
    absorbs_keywords = any(p.kind is ParamKind.VAR_KEYWORD for p in o_params)
    spare = [
        p
        for p in o_params
        if p.kind is ParamKind.KEYWORD_ONLY
        and p.name not in base_names
        and p.name not in matched
        and not absorbs_keywords
    ]
    for b in (p for p in b_params if p.kind is ParamKind.KEYWORD_ONLY):
        partner = by_name.get(b.name) or (spare.pop(0) if spare else None)
        if partner is not None:
            matched.add(partner.name)
        links.append(Link(b, partner))
    unmatched = tuple(p for p in o_params if p.kind not in VARIADIC and p.name not in matched)
    return Alignment(b_params, o_params, tuple(links), unmatched)
