"""HO111 mro-sibling-conflict

## What it does
Reports a class with several bases whose MRO puts one base's method ahead of a *sibling*
base's method of the same name and another signature: the bases do not inherit from one
another, so no override check ever compared them, yet the second base's ``self.name(...)``
calls reach the first base's definition. An ``error`` when such a call in the project is
rejected by the method the MRO picks, else a warning listing the differences.

## Why it matters
vLLM PR #17483's ``_build_decode`` rename (``block_table`` -> ``block_table_tensor``) crashes
with no override in sight when a mixin keeping the old name comes first in the bases (below).

## Example
```python
class MLACommonBuilder:
    def _build_decode(self, block_table_tensor, seq_lens): ...
    def build(self, meta):
        return self._build_decode(block_table_tensor=meta.block_table, seq_lens=meta.seq_lens)

class DecodeMixin:
    def _build_decode(self, block_table, seq_lens): ...

class Builder(DecodeMixin, MLACommonBuilder):  # build() now reaches DecodeMixin._build_decode
    pass
```

## Use instead
Give the sibling methods the same signature, or override the method in the combining class:
```python
class Builder(DecodeMixin, MLACommonBuilder):
    def _build_decode(self, block_table_tensor, seq_lens):
        return MLACommonBuilder._build_decode(self, block_table_tensor, seq_lens)
```

## Limitations
Reported once, at the first class whose bases bring the two definitions together. A class
that defines the method itself is checked against its first base's definition only
(HO101-HO110).

## References
- Python's C3 method resolution order (``__mro__``); pyright
  ``reportIncompatibleMethodOverride`` and mypy's "incompatible with definition in base class"
"""

from __future__ import annotations

from harness.overrides.rules._facts import Issue, Sibling

CODE = "HO111"
SYMBOL = "mro-sibling-conflict"
MESSAGE = (
    "{cls}'s method resolution order makes {winner}() override {loser}() of a sibling "
    "base: {differences}"
)
DESCRIPTION = "Multiple inheritance puts a base's method ahead of a sibling's of another signature."
SUBJECT = Sibling


def check(sibling: Sibling) -> list[Issue]:
    """One issue listing every difference the method-pair rules found, if any."""
    differences = "; ".join(sibling.differences)
    return [Issue((), (("differences", differences),))] if sibling.differences else []
