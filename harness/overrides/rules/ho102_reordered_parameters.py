"""HO102 reordered-parameters

## What it does
Reports an override that keeps the base method's parameter names but puts them at other
positions (including inserting a new parameter before existing ones).

## Why it matters
Positional callers bind values by position: after the reorder each value lands in the wrong
parameter, silently, or the call fails with ``missing`` / ``multiple values``. vLLM PR #17483
changed how ``MLACommonMetadataBuilder.build()`` calls ``_build_decode`` (by keyword, with the
renamed ``block_table_tensor``); a subclass that reorders the parameters of such a hook is
harmless for keyword callers and silently wrong for positional ones.

## Example
```python
class Base:
    def build(self, common_prefix_len, common_attn_metadata): ...

class Sub(Base):
    def build(self, common_attn_metadata, common_prefix_len): ...
```

## Use instead
```python
class Sub(Base):
    def build(self, common_prefix_len, common_attn_metadata): ...
```

## Limitations
Only the order of positional parameters is compared; keyword-only order is irrelevant.
An ``error`` needs a call that can run for the class (guards and unreached callers leave a
warning with the reason): see ``harness overrides --explain renamed-parameter``.

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
