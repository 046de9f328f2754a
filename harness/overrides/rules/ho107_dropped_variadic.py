"""HO107 dropped-variadic

## What it does
Reports an override that drops the ``*args`` or ``**kwargs`` of the base method.

## Why it matters
A base with ``**kwargs`` invites extra keywords, and the keywords of builder hooks change
between releases (vLLM PR #17483's ``self._build_decode(block_table_tensor=..., ...)``): an
override without ``**kwargs`` turns such calls into ``got an unexpected keyword argument``.

## Example
```python
class Base:
    def build(self, common_prefix_len, **kwargs): ...

class Sub(Base):
    def build(self, common_prefix_len): ...
```

## Use instead
Keep the variadic: ``def build(self, common_prefix_len, **kwargs): ...``.

## Limitations
Extra parameters of the override that the base's variadics covered are not reported again.
Severity as for every method-pair rule: ``harness overrides --explain HO101``.

## References
- pylint ``arguments-differ`` (W0221)
"""

from __future__ import annotations

from harness.overrides.compare import VARIADIC
from harness.overrides.facts.signature import ParamKind
from harness.overrides.rules._facts import Issue, Pair

CODE = "HO107"
SYMBOL = "dropped-variadic"
MESSAGE = "{override}() drops {variadic} of {base}()"
DESCRIPTION = "An override drops the base method's *args or **kwargs."
SUBJECT = Pair
DRIFT = True


def check(pair: Pair) -> list[Issue]:
    """One issue naming the ``*args``/``**kwargs`` the base accepts and the override does not."""
    alignment = pair.alignment
    if alignment is None:
        return []
    kept = {p.kind for p in alignment.override}
    lost = [p for p in alignment.base if p.kind in VARIADIC and p.kind not in kept]
    if not lost:
        return []
    stars = {ParamKind.VAR_POSITIONAL: "*", ParamKind.VAR_KEYWORD: "**"}
    dropped = " and ".join(f"'{stars[p.kind]}{p.name}'" for p in lost)
    return [Issue(tuple(p.name for p in lost), (("variadic", dropped),))]
