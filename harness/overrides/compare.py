"""Pure comparison of a base method's signature with its override's.

Parameter drift is found by aligning the two parameter lists once (:func:`align`); each rule
module then keeps the issues with its own code. Every exemption is a small named predicate,
tested on its own, in the spirit of pylint's ``_different_parameters`` family.
"""

from __future__ import annotations

from typing import NamedTuple

from harness.overrides.signature import MethodKind, Param, ParamKind, Signature

CONSTRUCTOR_HOOKS = frozenset({"__init__", "__new__", "__init_subclass__", "__post_init__"})

_POSITIONAL = (ParamKind.POSITIONAL_ONLY, ParamKind.POSITIONAL_OR_KEYWORD)
_KIND_WORDS = {
    ParamKind.POSITIONAL_ONLY: "positional-only",
    ParamKind.POSITIONAL_OR_KEYWORD: "positional-or-keyword",
    ParamKind.KEYWORD_ONLY: "keyword-only",
}


class Issue(NamedTuple):
    """One drift between a base signature and an override, before it becomes a Finding."""

    code: str
    params: tuple[str, ...]
    """Drifted parameter names (as the base spells them, then new names)."""
    fields: tuple[tuple[str, str], ...] = ()
    """Values for the rule's message template."""


# --- exemptions -------------------------------------------------------------------------


def is_exempt_method(name: str) -> bool:
    """Constructor hooks and name-mangled ``__private`` methods are never compared.

    Constructors are called with the subclass's own signature (``C(...)``), so changing it is
    normal; ``__private`` names are mangled per class, so they cannot override anything.
    """
    if name in CONSTRUCTOR_HOOKS:
        return True
    return name.startswith("__") and not name.endswith("__")


def is_operator_dunder(name: str) -> bool:
    """Dunders other than ``__call__`` are called positionally by the interpreter.

    ``__eq__(self, other)`` may become ``__eq__(self, rhs)``; ``__call__`` is called with
    user keywords, so its parameter names matter like any method's.
    """
    return len(name) > 4 and name.startswith("__") and name.endswith("__") and name != "__call__"


def is_dummy(name: str) -> bool:
    """A base parameter named ``_`` or ``_x`` is "unused": nobody passes it by keyword."""
    return name.startswith("_")


def absorbs_everything(sig: Signature) -> bool:
    """An override taking both ``*args`` and ``**kwargs`` accepts any call."""
    kinds = {p.kind for p in sig.params}
    return ParamKind.VAR_POSITIONAL in kinds and ParamKind.VAR_KEYWORD in kinds


def is_catch_all(sig: Signature) -> bool:
    """A base taking only ``*args, **kwargs`` declares no signature to drift from.

    ``CustomOp.forward_cuda(self, *args, **kwargs)`` in vLLM is a dispatch slot: every
    override narrows it, by design.
    """
    explicit = sig.explicit_params()
    return absorbs_everything(sig) and all(
        p.kind in (ParamKind.VAR_POSITIONAL, ParamKind.VAR_KEYWORD) for p in explicit
    )


def kind_breaks_callers(base: Signature, override: Signature) -> bool:
    """A class or static method overridden by an instance method breaks ``Class.m(...)`` calls.

    The other direction is compatible for the calls that matter: ``self.m(x)`` works whether
    ``m`` is an instance, class or static method, as long as the explicit parameters agree.
    """
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


# --- alignment ----------------------------------------------------------------------------


def _has(sig_params: tuple[Param, ...], kind: ParamKind) -> bool:
    return any(p.kind is kind for p in sig_params)


def _positional_view(params: tuple[Param, ...], operator: bool) -> tuple[Param, ...]:
    """Treat operands of operator dunders as positional-only: their names never matter."""
    if not operator:
        return params
    return tuple(
        p._replace(kind=ParamKind.POSITIONAL_ONLY) if p.kind in _POSITIONAL else p for p in params
    )


def dropped_variadics(base: tuple[Param, ...], override: tuple[Param, ...]) -> list[Issue]:
    """``*args``/``**kwargs`` the base accepts and the override does not."""
    dropped: list[str] = []
    names: list[str] = []
    for kind, star in ((ParamKind.VAR_POSITIONAL, "*"), (ParamKind.VAR_KEYWORD, "**")):
        for p in base:
            if p.kind is kind and not _has(override, kind):
                dropped.append(f"{star}{p.name}")
                names.append(p.name)
    if not dropped:
        return []
    return [Issue("HO107", tuple(names), (("variadic", " and ".join(f"'{d}'" for d in dropped)),))]


def moved_parameters(base: list[Param], override: list[Param]) -> frozenset[str]:
    """Base positional parameters that land at another position for a reason other than a
    removal before them: a changed relative order, or a new parameter inserted before them.

    ``plan(self, batch, num_tokens)`` -> ``plan(self, num_tokens)`` only removes ``batch``
    (HO103); ``forward(self, q, k)`` -> ``forward(self, k, q)`` and ``f(self, a, b)`` ->
    ``f(self, a, x, b)`` move parameters (HO102): positional callers bind the wrong values.
    """
    o_names = [p.name for p in override]
    keyword = [p.name for p in base if p.kind is not ParamKind.POSITIONAL_ONLY]
    shared = [n for n in keyword if n in o_names]
    order_changed = shared != [n for n in o_names if n in shared]
    all_base = {p.name for p in base}
    moved: set[str] = set()
    for index, param in enumerate(base):
        if param.kind is ParamKind.POSITIONAL_ONLY or param.name not in o_names:
            continue
        o_index = o_names.index(param.name)
        if o_index == index:
            continue
        inserted = any(n not in all_base for n in o_names[:o_index])
        if order_changed or inserted:
            moved.add(param.name)
    return frozenset(moved)


def _positional_issue(
    index: int,
    b: Param,
    override: tuple[Param, ...],
    by_name: dict[str, Param],
    base_names: frozenset[str],
    matched: set[str],
    moved: frozenset[str],
) -> Issue | None:
    """Classify one positional base parameter against the override."""
    o_pos = [p for p in override if p.kind in _POSITIONAL]
    at = o_pos[index] if index < len(o_pos) else None
    if at is not None and (at.name == b.name or b.kind is ParamKind.POSITIONAL_ONLY):
        # Same name in the same slot, or a positional-only slot (its name is not part of
        # the interface: renaming or swapping positional-only names is legal).
        matched.add(at.name)
        return _same_slot(b, at)
    partner = by_name.get(b.name)
    if partner is not None:
        matched.add(partner.name)
        if partner.kind is ParamKind.KEYWORD_ONLY:
            return Issue(
                "HO105",
                (b.name,),
                (("name", b.name), ("new_kind", "keyword-only"), ("old_kind", _KIND_WORDS[b.kind])),
            )
        if b.name in moved:
            return Issue("HO102", (b.name,))
        return _same_slot(b, partner)
    if at is not None and at.name not in base_names:
        matched.add(at.name)
        if at.kind is ParamKind.POSITIONAL_ONLY:
            return Issue(
                "HO105",
                (b.name,),
                (
                    ("name", b.name),
                    ("new_kind", "positional-only"),
                    ("old_kind", _KIND_WORDS[b.kind]),
                ),
            )
        if is_dummy(b.name):
            return _default_issue(b, at)  # nobody passes `_x=` by keyword
        return Issue("HO101", (b.name, at.name), (("old", b.name), ("new", at.name)))
    has_star = _has(override, ParamKind.VAR_POSITIONAL)
    has_kw = _has(override, ParamKind.VAR_KEYWORD)
    if has_star and (has_kw or b.kind is ParamKind.POSITIONAL_ONLY):
        return None  # absorbed by the override's *args (and **kwargs)
    return Issue("HO103", (b.name,), (("name", b.name),))


def _same_slot(b: Param, o: Param) -> Issue | None:
    if b.kind is ParamKind.POSITIONAL_OR_KEYWORD and o.kind is ParamKind.POSITIONAL_ONLY:
        return Issue(
            "HO105",
            (b.name,),
            (("name", b.name), ("new_kind", "positional-only"), ("old_kind", _KIND_WORDS[b.kind])),
        )
    return _default_issue(b, o)


def _default_issue(b: Param, o: Param) -> Issue | None:
    if b.has_default and not o.has_default:
        return Issue("HO106", (b.name,), (("name", b.name),))
    return None


def _keyword_only_issues(
    base: tuple[Param, ...],
    override: tuple[Param, ...],
    by_name: dict[str, Param],
    base_names: frozenset[str],
    matched: set[str],
) -> list[Issue]:
    """Keyword-only base parameters: same name, widened, renamed (paired in order) or removed."""
    issues: list[Issue] = []
    spare = [
        p
        for p in override
        if p.kind is ParamKind.KEYWORD_ONLY and p.name not in base_names and p.name not in matched
    ]
    for b in (p for p in base if p.kind is ParamKind.KEYWORD_ONLY):
        partner = by_name.get(b.name)
        if partner is not None:
            matched.add(partner.name)
            if partner.kind is ParamKind.POSITIONAL_ONLY:
                issues.append(
                    Issue(
                        "HO105",
                        (b.name,),
                        (
                            ("name", b.name),
                            ("new_kind", "positional-only"),
                            ("old_kind", "keyword-only"),
                        ),
                    )
                )
            elif (issue := _default_issue(b, partner)) is not None:
                issues.append(issue)  # keyword-only -> positional-or-keyword is legal widening
            continue
        if spare:
            new = spare.pop(0)
            matched.add(new.name)
            issues.append(Issue("HO101", (b.name, new.name), (("old", b.name), ("new", new.name))))
        elif not _has(override, ParamKind.VAR_KEYWORD):
            issues.append(Issue("HO103", (b.name,), (("name", b.name),)))
    return issues


def added_required(
    base: tuple[Param, ...], override: tuple[Param, ...], matched: set[str]
) -> list[Issue]:
    """Required override parameters that no base parameter maps to.

    A base ``*args`` already covers extra positional parameters and a base ``**kwargs`` extra
    keyword-only ones (HO107 reports the narrowing once instead).
    """
    issues: list[Issue] = []
    base_star = _has(base, ParamKind.VAR_POSITIONAL)
    base_kw = _has(base, ParamKind.VAR_KEYWORD)
    for o in override:
        if o.has_default or o.name in matched:
            continue
        if (o.kind in _POSITIONAL and not base_star) or (
            o.kind is ParamKind.KEYWORD_ONLY and not base_kw
        ):
            issues.append(Issue("HO104", (o.name,), (("name", o.name),)))
    return issues


def align(base: Signature, override: Signature) -> list[Issue]:
    """All parameter drift (HO101-HO107) of ``override`` against ``base``."""
    if not comparable(base, override):
        return []
    operator = is_operator_dunder(base.name)
    b_params = _positional_view(base.explicit_params(), operator)
    o_params = _positional_view(override.explicit_params(), operator)
    named = [p for p in o_params if p.kind not in (ParamKind.VAR_POSITIONAL, ParamKind.VAR_KEYWORD)]
    by_name = {p.name: p for p in named if p.kind is not ParamKind.POSITIONAL_ONLY}
    base_names = frozenset(p.name for p in b_params)
    matched: set[str] = set()
    issues: list[Issue] = []
    b_pos = [p for p in b_params if p.kind in _POSITIONAL]
    moved = moved_parameters(b_pos, [p for p in o_params if p.kind in _POSITIONAL])
    reordered: list[str] = []
    for index, b in enumerate(b_pos):
        issue = _positional_issue(index, b, o_params, by_name, base_names, matched, moved)
        if issue is None:
            continue
        if issue.code == "HO102":
            reordered.append(b.name)
        else:
            issues.append(issue)
    if reordered:
        old = ", ".join(p.name for p in b_pos)
        new = ", ".join(p.name for p in o_params if p.kind in _POSITIONAL)
        issues.append(Issue("HO102", tuple(reordered), (("old", old), ("new", new))))
    issues.extend(_keyword_only_issues(b_params, o_params, by_name, base_names, matched))
    issues.extend(dropped_variadics(b_params, o_params))
    issues.extend(added_required(b_params, o_params, matched))
    return issues


def method_kind_word(sig: Signature) -> str:
    """``a static method`` / ``a class method`` / ``an instance method``."""
    return {
        MethodKind.STATIC: "a static method",
        MethodKind.CLASS: "a class method",
        MethodKind.INSTANCE: "an instance method",
    }[sig.kind]
