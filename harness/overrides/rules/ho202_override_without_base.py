"""HO202 override-without-base (optional; enable with ``--select HO202``)

## What it does
Reports a method decorated with ``@override`` when no resolvable base class defines a method
of that name.

## Why it matters
After a base method is renamed (vLLM PR #17483 renamed ``_build_decode``'s parameters; a method
rename is the same mistake one level up), the subclass's method is dead code. ``@override``
exists to catch this.

## Example
```python
class Sub(Base):
    @override
    def _build_decode_v0(self, block_table_tensor, seq_lens): ...
```

## Use instead
Name a method the base defines: ``@override def _build_decode(self, block_table_tensor, seq_lens)``.

## Limitations
Classes with a base the checker cannot resolve (outside the scanned tree) are skipped: the
method may override something there.

## References
- PEP 698 (``typing.override``)
"""

from __future__ import annotations

from harness.overrides.rules._facts import Issue, NoBase

CODE = "HO202"
SYMBOL = "override-without-base"
MESSAGE = "{override}() is decorated with @override but no base class defines it"
DESCRIPTION = "@override on a method that overrides nothing."
ENABLED_BY_DEFAULT = False
SUBJECT = NoBase


def check(lone: NoBase) -> list[Issue]:
    """An ``@override`` method without a base definition, when every base is known."""
    return [Issue()] if lone.method.has_override_decorator and lone.mro_resolved else []
