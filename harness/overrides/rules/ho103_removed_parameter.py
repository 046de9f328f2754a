"""HO103 removed-parameter

## What it does
Reports a base parameter the override no longer accepts: a positional parameter beyond the
override's positional ones, or a keyword-only parameter with no counterpart, unless the
override absorbs it with ``*args``/``**kwargs``.

## Why it matters
Every caller that still passes the argument crashes with ``takes N positional arguments but
M were given`` or ``got an unexpected keyword argument``: a subclass of vLLM PR #17483's
builders that dropped a parameter ``build()`` passes to ``_build_decode`` fails on the decode
path only.

## Example
```python
class Base:
    def _build_decode(self, block_table_tensor, seq_lens): ...

class Sub(Base):
    def _build_decode(self, block_table_tensor): ...
```

## Use instead
Keep the parameter (accept and ignore it if unused):
``def _build_decode(self, block_table_tensor, seq_lens): ...``.

## Limitations
A removal at a position where the override has a new name is reported as a rename (HO101).
Severity as for every method-pair rule: ``harness overrides --explain HO101``.

## References
- vLLM PR #17483; pylint ``arguments-differ`` (W0221)
"""

from __future__ import annotations

from harness.overrides.compare import Link
from harness.overrides.facts.signature import ParamKind
from harness.overrides.rules._facts import Issue, Pair

CODE = "HO103"
SYMBOL = "removed-parameter"
MESSAGE = "{override}() removes parameter '{name}' of {base}()"
DESCRIPTION = "An override no longer accepts a parameter of the base method."
SUBJECT = Pair
DRIFT = True


def _absorbed(link: Link, star: bool, starstar: bool) -> bool:
    """The override's ``*args``/``**kwargs`` take the argument instead.

    A positional-or-keyword argument needs both (callers may pass it either way); a
    positional-only one ``*args``, a keyword-only one ``**kwargs``.
    """
    if link.base.kind is ParamKind.KEYWORD_ONLY:
        return starstar
    return star and (starstar or link.base.kind is ParamKind.POSITIONAL_ONLY)


def check(pair: Pair) -> list[Issue]:
    """Base parameters that no override parameter receives and no variadic absorbs."""
    alignment = pair.alignment
    if alignment is None:
        return []
    star = alignment.has(alignment.override, ParamKind.VAR_POSITIONAL)
    starstar = alignment.has(alignment.override, ParamKind.VAR_KEYWORD)
    return [
        Issue((link.base.name,), (("name", link.base.name),))
        for link in alignment.links
        if link.override is None and not _absorbed(link, star, starstar)
    ]
