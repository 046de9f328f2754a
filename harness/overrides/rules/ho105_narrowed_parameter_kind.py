"""HO105 narrowed-parameter-kind

## What it does
Reports a positional-or-keyword base parameter that the override makes keyword-only (after
``*``) or positional-only (before ``/``). The opposite direction is legal widening.

## Why it matters
Keyword-only breaks positional callers; positional-only breaks keyword callers. vLLM PR #17483's
``build()`` passes ``_build_decode(block_table_tensor=..., seq_lens=...)`` by keyword, so a
positional-only ``block_table_tensor`` crashes like the renamed ROCm override did.

## Example
```python
class Base:
    def _build_decode(self, block_table_tensor, seq_lens): ...

class Sub(Base):
    def _build_decode(self, block_table_tensor, /, seq_lens): ...
```

## Use instead
The base's kinds: ``def _build_decode(self, block_table_tensor, seq_lens): ...``.

## Limitations
Operator dunders are treated as positional-only on both sides. Severity as for every method-pair
rule: ``harness overrides --explain HO101``.

## References
- PEP 3102 (keyword-only arguments), PEP 570 (positional-only parameters)
"""

from __future__ import annotations

from harness.overrides.facts.signature import ParamKind
from harness.overrides.rules._facts import Issue, Pair

CODE = "HO105"
SYMBOL = "narrowed-parameter-kind"
MESSAGE = "{override}() makes parameter '{name}' {new_kind}; it is {old_kind} in {base}()"
DESCRIPTION = "An override makes a positional-or-keyword parameter keyword-only or positional-only."
SUBJECT = Pair
DRIFT = True

_KIND_WORDS = {
    ParamKind.POSITIONAL_ONLY: "positional-only",
    ParamKind.POSITIONAL_OR_KEYWORD: "positional-or-keyword",
    ParamKind.KEYWORD_ONLY: "keyword-only",
}


def check(pair: Pair) -> list[Issue]:
    """Base parameters whose override parameter takes the argument in fewer ways."""
    if pair.alignment is None:
        return []
    return [
        Issue(
            (link.base.name,),
            (
                ("name", link.base.name),
                ("new_kind", _KIND_WORDS[link.override.kind]),
                ("old_kind", _KIND_WORDS[link.base.kind]),
            ),
        )
        for link in pair.alignment.links
        if link.override is not None and link.narrowed
    ]
