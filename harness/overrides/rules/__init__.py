"""The rule registry: one module per rule, listed explicitly (no import side effects).

Each rule module defines ``CODE``, ``SYMBOL``, ``MESSAGE`` (a ``str.format`` template),
``DESCRIPTION`` (one line), ``SUBJECT`` (the type of fact it inspects, see
:mod:`harness.overrides.rules._facts`) and ``check(subject) -> list[Issue]``, its detection.
A rule may set ``ENABLED_BY_DEFAULT = False`` (an optional rule, run when selected),
``DRIFT = True`` (it finds signature drift of a :class:`Pair`: the differences of one override
are reported together, once per call site) and ``NEEDS_EVIDENCE = True`` (reported only with
a call that the override rejects). Its module docstring is the documentation
``harness overrides --explain CODE`` prints. Nothing outside a rule's module names its code.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any, NamedTuple

from harness.errors import HarnessError
from harness.overrides.rules._facts import Issue, NoBase, Pair, Sibling


class Rule(NamedTuple):
    """A rule's identity, message template and documentation."""

    code: str
    symbol: str
    message: str
    description: str
    doc: str
    enabled_by_default: bool
    subject: type
    """The type of fact ``check`` inspects."""
    check: Callable[[Any], list[Issue]]
    needs_evidence: bool = False
    """Report an issue only with a call in the project that the override rejects."""
    drift: bool = False
    """A difference between an override's signature and its base's."""
    module: str = ""
    """The module that defines the rule."""

    def format(self, fields: dict[str, str]) -> str:
        """The message for one finding."""
        return self.message.format(**fields)


def _registry(modules: list[ModuleType]) -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for module in modules:
        rule = Rule(
            code=module.CODE,
            symbol=module.SYMBOL,
            message=module.MESSAGE,
            description=module.DESCRIPTION,
            doc=(module.__doc__ or "").strip(),
            enabled_by_default=getattr(module, "ENABLED_BY_DEFAULT", True),
            subject=module.SUBJECT,
            check=module.check,
            needs_evidence=getattr(module, "NEEDS_EVIDENCE", False),
            drift=getattr(module, "DRIFT", False),
            module=module.__name__,
        )
        if rule.code in rules or any(r.symbol == rule.symbol for r in rules.values()):
            raise RuntimeError(f"duplicate rule registration: {rule.code} {rule.symbol}")
        rules[rule.code] = rule
    return rules


_MODULES = (
    "ho101_renamed_parameter",
    "ho102_reordered_parameters",
    "ho103_removed_parameter",
    "ho104_added_required_parameter",
    "ho105_narrowed_parameter_kind",
    "ho106_removed_default",
    "ho107_dropped_variadic",
    "ho108_method_kind_mismatch",
    "ho109_property_method_mismatch",
    "ho110_async_sync_mismatch",
    "ho111_mro_sibling_conflict",
    "ho112_narrowed_catch_all",
    "ho201_missing_override_decorator",
    "ho202_override_without_base",
    "ho301_unused_ignore",
    "ho302_ignore_without_code",
    "ho303_stale_baseline_entry",
    "ho401_unparsable_file",
    "ho402_cyclic_inheritance",
    "ho403_inconsistent_mro",
    "ho404_unreadable_path",
    "ho405_misrooted_import",
)
"""The rule modules of this package, in code order: the one list of rules."""

RULES: dict[str, Rule] = _registry(
    [importlib.import_module(f"{__name__}.{name}") for name in _MODULES]
)
"""Every rule by code, in code order."""
_BY_SYMBOL = {rule.symbol: rule for rule in RULES.values()}


def get(code_or_symbol: str) -> Rule:
    """Look a rule up by code or by symbol (``renamed-parameter``), in any case."""
    key = code_or_symbol.strip()
    rule = RULES.get(key.upper()) or _BY_SYMBOL.get(key.lower())
    if rule is None:
        raise HarnessError(f"unknown rule {code_or_symbol!r}; available: {', '.join(RULES)}")
    return rule


class RuleSet:
    """The rules of one run (default ones plus those selected), grouped by subject type."""

    def __init__(self, select: Iterable[str] = ()) -> None:
        wanted = {c.upper() for c in select}
        self.by_subject: dict[type, list[Rule]] = {}
        for rule in RULES.values():
            if rule.enabled_by_default or rule.code in wanted:
                self.by_subject.setdefault(rule.subject, []).append(rule)

    def inspect(self, subject_type: type) -> bool:
        """Whether any enabled rule looks at facts of this type (to skip building them)."""
        return subject_type in self.by_subject

    def check(self, subject: object) -> list[tuple[Rule, Issue]]:
        """What the enabled rules for ``subject``'s type find in it, in code order."""
        rules = self.by_subject.get(type(subject), ())
        return [(rule, issue) for rule in rules for issue in rule.check(subject)]


__all__ = ["RULES", "Issue", "NoBase", "Pair", "Rule", "RuleSet", "Sibling", "get"]
