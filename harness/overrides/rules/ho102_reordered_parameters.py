"""HO102 reordered-parameters

## What it does
Reports an override that keeps the base method's parameter names but puts them at other
positions (including inserting a new parameter before existing ones).

## Why it matters
Positional callers bind each value to the wrong parameter, silently, or fail with ``missing`` /
``multiple values``. vLLM PR #17483 calls ``_build_decode`` by keyword, which a reorder does not
break; a positional call of the same hook would be silently wrong.

## Example
```python
class Base:
    def build(self, common_prefix_len, common_attn_metadata): ...

class Sub(Base):
    def build(self, common_attn_metadata, common_prefix_len): ...
```

## Use instead
The base's order: ``def build(self, common_prefix_len, common_attn_metadata): ...``.

## Limitations
Only positional parameters are compared; keyword-only order is irrelevant. Severity as for every
method-pair rule: ``harness overrides --explain HO101``.

## References
- vLLM PR #17483; pylint ``arguments-differ`` (W0221)
"""

from __future__ import annotations

from harness.overrides.rules._facts import Issue, Pair

CODE = "HO102"
SYMBOL = "reordered-parameters"
MESSAGE = "{override}() reorders the parameters of {base}(): ({old}) became ({new})"
DESCRIPTION = "An override moves parameters to different positions."
SUBJECT = Pair
DRIFT = True


def check(pair: Pair) -> list[Issue]:
    """One issue naming every positional parameter that moved."""
    alignment = pair.alignment
    if alignment is None:
        return []
    moved = tuple(link.base.name for link in alignment.links if link.moved)
    if not moved:
        return []
    old = ", ".join(p.name for p in alignment.positional(alignment.base))
    new = ", ".join(p.name for p in alignment.positional(alignment.override))
    return [Issue(moved, (("old", old), ("new", new)))]
