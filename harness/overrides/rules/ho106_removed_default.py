"""HO106 removed-default

## What it does
Reports a parameter that has a default in the base method and none in the override.

## Why it matters
Callers that rely on the default crash with ``missing 1 required ... argument``, only on the
path that omits the argument, which CI may never run (vLLM PR #17483's ``_build_decode``
crash surfaced only on the first decode batch on ROCm).

## Example
```python
class Base:
    def build(self, num_reqs, common_prefix_len=0): ...

class Sub(Base):
    def build(self, num_reqs, common_prefix_len): ...
```

## Use instead
Keep the default: ``def build(self, num_reqs, common_prefix_len=0): ...``.

## Limitations
The default values themselves are not compared. Severity as for every method-pair rule:
``harness overrides --explain HO101``.

## References
- pylint ``arguments-differ`` (W0221); mypy ``[override]``
"""

from __future__ import annotations

from harness.overrides.rules._facts import Issue, Pair

CODE = "HO106"
SYMBOL = "removed-default"
MESSAGE = "{override}() removes the default of parameter '{name}' that {base}() has"
DESCRIPTION = "An override removes a parameter's default value."
SUBJECT = Pair
DRIFT = True


def check(pair: Pair) -> list[Issue]:
    """Parameters that lose their default, unless already reported as renamed, moved or
    narrowed (one finding per parameter)."""
    if pair.alignment is None:
        return []
    return [
        Issue((link.base.name,), (("name", link.base.name),))
        for link in pair.alignment.links
        if link.lost_default and not (link.renamed or link.moved or link.narrowed)
    ]
