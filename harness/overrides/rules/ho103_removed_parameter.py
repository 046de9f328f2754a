"""HO103 removed-parameter

## What it does
Reports a base parameter the override no longer accepts: a positional parameter beyond the
override's positional ones, or a keyword-only parameter with no counterpart, unless the
override absorbs it with ``*args``/``**kwargs``.

## Why it matters
Every caller that still passes the argument crashes with ``takes N positional arguments but
M were given`` or ``got an unexpected keyword argument``. vLLM PR #17483 removed and renamed
arguments of ``_build_decode`` in the base class; a subclass that drops a parameter the base
``build()`` still passes fails only on the code path (decode, prefill) that calls it.

## Example
```python
class Base:
    def _build_decode(self, block_table_tensor, seq_lens): ...

class Sub(Base):
    def _build_decode(self, block_table_tensor): ...
```

## Use instead
```python
class Sub(Base):
    def _build_decode(self, block_table_tensor, seq_lens): ...  # or accept and ignore it
```

## Limitations
A removal at a position where the override has a new name is reported as a rename (HO101).

## References
- vLLM PR #17483; pylint ``arguments-differ`` (W0221)
"""

from __future__ import annotations

from harness.overrides.compare import Issue
from harness.overrides.rules._pair import Pair, issues_with_code

CODE = "HO103"
SYMBOL = "removed-parameter"
MESSAGE = "{override}() removes parameter '{name}' of {base}()"
DESCRIPTION = "An override no longer accepts a parameter of the base method."
ENABLED_BY_DEFAULT = True


def check(pair: Pair) -> list[Issue]:
    """Removals found by the parameter alignment."""
    return issues_with_code(pair, CODE)
