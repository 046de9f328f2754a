"""HO302 ignore-without-code

## What it does
Reports a bare ``# harness: ignore`` comment (without ``[CODE]``), which suppresses nothing.

## Why it matters
A blanket suppression would hide every future drift of the method, including the crash vLLM
PR #17483 shipped (``_build_decode`` renamed in the base, not in a subclass).

## Example
```python
def _build_decode(self, block_table, seq_lens):  # harness: ignore
```

## Use instead
Name the code: ``def _build_decode(self, block_table, seq_lens):  # harness: ignore[HO101]``.

## Limitations
None known.

## References
- mypy ``ignore-without-code``
"""

from __future__ import annotations

from harness.overrides.rules._facts import Issue
from harness.overrides.suppress import IgnoreComment

CODE = "HO302"
SYMBOL = "ignore-without-code"
MESSAGE = "'harness: ignore' without [CODE] suppresses nothing; name the code(s)"
DESCRIPTION = "A suppression comment without a rule code."
SUBJECT = IgnoreComment


def check(comment: IgnoreComment) -> list[Issue]:
    return [] if comment.codes else [Issue(key="bare")]
