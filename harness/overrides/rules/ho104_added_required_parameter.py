"""HO104 added-required-parameter

## What it does
Reports a parameter without a default that the override adds and the base method does not
have. Adding parameters with defaults is fine.

## Why it matters
Every caller written against the base signature omits the new argument and crashes with
``missing 1 required positional argument``: vLLM PR #17483's ``build()`` passes
``_build_decode`` only the arguments the base signature names.

## Example
```python
class Base:
    def build(self, common_prefix_len): ...

class Sub(Base):
    def build(self, common_prefix_len, common_attn_metadata): ...
```

## Use instead
Give the new parameter a default:
``def build(self, common_prefix_len, common_attn_metadata=None): ...``.

## Limitations
If the base accepts ``*args``/``**kwargs``, extra parameters are covered by HO107 instead.
Members of ``typing.Protocol`` classes are not checked: vLLM's ``SupportsPP`` declares
``forward(self, *, intermediate_tensors)`` and every model adds its own positional inputs (171
findings on vLLM 0.9.0, none a crash). Severity as for every method-pair rule: ``harness
overrides --explain HO101``.

## References
- vLLM PR #17483; pylint ``arguments-differ`` (W0221)
"""

from __future__ import annotations

from harness.overrides.facts.signature import ParamKind
from harness.overrides.rules._facts import Issue, Pair

CODE = "HO104"
SYMBOL = "added-required-parameter"
MESSAGE = "{override}() adds required parameter '{name}' that callers of {base}() do not pass"
DESCRIPTION = "An override adds a parameter without a default."
SUBJECT = Pair
DRIFT = True


def check(pair: Pair) -> list[Issue]:
    """Required override parameters that no base argument reaches.

    A base ``*args`` already covers extra positional parameters and a base ``**kwargs`` extra
    keyword-only ones (dropped-variadic reports the narrowing once). Not against ``Protocol``
    members, which often declare only the parameters the protocol needs.
    """
    alignment = pair.alignment
    if alignment is None or pair.base_is_protocol:
        return []
    star = alignment.has(alignment.base, ParamKind.VAR_POSITIONAL)
    starstar = alignment.has(alignment.base, ParamKind.VAR_KEYWORD)
    return [
        Issue((p.name,), (("name", p.name),))
        for p in alignment.unmatched
        if not p.has_default and not (starstar if p.kind is ParamKind.KEYWORD_ONLY else star)
    ]
