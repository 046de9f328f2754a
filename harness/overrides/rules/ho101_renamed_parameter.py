"""HO101 renamed-parameter

## What it does
Reports an override that renames a parameter callers can pass by keyword: a
positional-or-keyword parameter at the same position, or a keyword-only parameter (paired in
order with the override's new keyword-only parameters).

## Why it matters
vLLM PR #17483 renamed ``MLACommonMetadataBuilder._build_decode(block_table, seq_lens)``'s
``block_table`` to ``block_table_tensor`` and ``build()`` passes it by keyword; the ROCm
subclass ``AiterMLAMetadataBuilder`` kept ``block_table`` and crashed on the first decode batch
with ``TypeError: ... got an unexpected keyword argument 'block_table_tensor'``. mypy accepts the
rename in every mode.

## Example
```python
class MLACommonMetadataBuilder:
    def _build_decode(self, block_table_tensor, seq_lens): ...

class AiterMLAMetadataBuilder(MLACommonMetadataBuilder):
    def _build_decode(self, block_table, seq_lens): ...
```

## Use instead
The base's names: ``def _build_decode(self, block_table_tensor, seq_lens): ...``.

## Limitations
Positional-only parameters, operands of operator dunders (``__eq__(self, other)``) and base
parameters named ``_x`` may be renamed freely; a keyword-only parameter the override takes
in ``**kwargs`` is not a rename.

Severity, for every method-pair rule: an ``error`` needs a call in the project that the override
rejects (and the base does not) and that can run for an instance of the class; where the source
shows it cannot (a guard, a caller the class never runs), a warning shows the call and says why.

## References
- vLLM PR #17483 (``block_table`` -> ``block_table_tensor``)
- PEP 570 (positional-only parameters); pylint ``arguments-renamed`` (W0237)
"""

from __future__ import annotations

from harness.overrides.rules._facts import Issue, Pair

CODE = "HO101"
SYMBOL = "renamed-parameter"
MESSAGE = "{override}() renames parameter '{old}' of {base}() to '{new}'"
DESCRIPTION = "An override renames a parameter that callers can pass by keyword."
SUBJECT = Pair
DRIFT = True


def check(pair: Pair) -> list[Issue]:
    """Base parameters whose argument reaches an override parameter of another name.

    A rename that also narrows the kind (to positional-only) is reported as a narrowing.
    """
    if pair.alignment is None:
        return []
    return [
        Issue(
            (link.base.name, link.override.name),
            (("old", link.base.name), ("new", link.override.name)),
        )
        for link in pair.alignment.links
        if link.override is not None and link.renamed and not link.narrowed
    ]
