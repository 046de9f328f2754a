"""HO301 unused-ignore

## What it does
Reports a ``# harness: ignore[CODE]`` comment that suppresses nothing.

## Why it matters
A stale suppression hides the next real problem on its line: an ignore left on a subclass's
``def`` after vLLM PR #17483's ``_build_decode`` fix would swallow the next drift there.

## Example
```python
def _build_decode(self, block_table_tensor, seq_lens):  # harness: ignore[HO101]
```

## Use instead
Drop the comment: ``def _build_decode(self, block_table_tensor, seq_lens):``.

## Limitations
In ``--changed`` mode only the changed files are checked for unused ignores.

## References
- mypy ``unused-ignore`` (``--warn-unused-ignores``)
"""

from __future__ import annotations

from harness.overrides.rules._facts import Issue
from harness.overrides.suppress import IgnoreComment

CODE = "HO301"
SYMBOL = "unused-ignore"
MESSAGE = "unused 'harness: ignore[{codes}]' comment"
DESCRIPTION = "A suppression comment that suppresses nothing."
SUBJECT = IgnoreComment


def check(comment: IgnoreComment) -> list[Issue]:
    """The codes of the comment that suppressed no finding on its line."""
    unused = [c for c in comment.codes if c.upper() not in comment.used]
    if not unused:
        return []
    joined = ",".join(unused)
    return [Issue((), (("codes", joined),), key=joined)]
