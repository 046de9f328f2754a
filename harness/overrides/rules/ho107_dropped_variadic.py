"""HO107 dropped-variadic

## What it does
Reports an override that drops the ``*args`` or ``**kwargs`` of the base method.

## Why it matters
A base that accepts ``**kwargs`` invites callers to pass extra keywords, and vLLM PR #17483's
keyword call ``self._build_decode(block_table_tensor=..., seq_lens=...)`` shows that the
keywords of builder hooks change between releases. An override without ``**kwargs`` turns
every such call into ``got an unexpected keyword argument``.

## Example
```python
class Base:
    def build(self, common_prefix_len, **kwargs): ...

class Sub(Base):
    def build(self, common_prefix_len): ...
```

## Use instead
```python
class Sub(Base):
    def build(self, common_prefix_len, **kwargs): ...
```

## Limitations
Extra parameters of the override that the base's variadics covered are not reported again.

## References
- pylint ``arguments-differ`` (W0221)
"""

from __future__ import annotations

from harness.overrides.compare import Issue
from harness.overrides.rules._pair import Pair, issues_with_code

CODE = "HO107"
SYMBOL = "dropped-variadic"
MESSAGE = "{override}() drops {variadic} of {base}()"
DESCRIPTION = "An override drops the base method's *args or **kwargs."
ENABLED_BY_DEFAULT = True


def check(pair: Pair) -> list[Issue]:
    """Dropped variadics found by the parameter alignment."""
    return issues_with_code(pair, CODE)
