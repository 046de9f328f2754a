"""HO108 method-kind-mismatch

## What it does
Reports an instance method overriding a static or class method. (An instance method
overridden by a class or static method keeps ``self.m(...)`` working; its explicit
parameters are compared as usual.)

## Why it matters
A caller of ``Class.hook(x)`` passes ``x`` where the override expects ``self``, so every
argument shifts by one or goes missing. vLLM's backends mix static factories
(``get_builder_cls()``) and instance hooks (``_build_decode``, PR #17483); dropping
``@staticmethod`` from such a factory breaks every ``Backend.get_builder_cls()`` call.

## Example
```python
class AttentionBackend:
    @staticmethod
    def get_builder_cls(): ...

class MyBackend(AttentionBackend):
    def get_builder_cls(self): ...
```

## Use instead
Keep the kind: ``@staticmethod`` on ``def get_builder_cls(): ...`` in ``MyBackend`` too.

## Limitations
Parameters are not compared when the kinds differ (they are misaligned by construction).
Severity as for every method-pair rule: ``harness overrides --explain HO101``.

## References
- Python data model, "staticmethod" and "classmethod"; pyright ``reportIncompatibleMethodOverride``
"""

from __future__ import annotations

from harness.overrides.compare import kind_breaks_callers
from harness.overrides.facts.signature import MethodKind
from harness.overrides.rules._facts import Issue, Pair

CODE = "HO108"
SYMBOL = "method-kind-mismatch"
MESSAGE = "{override}() is {kind} but {base}() is {base_kind}"
DESCRIPTION = "An override changes static/class/instance method kind."
SUBJECT = Pair
DRIFT = True

_KIND_WORDS = {
    MethodKind.STATIC: "a static method",
    MethodKind.CLASS: "a class method",
    MethodKind.INSTANCE: "an instance method",
}


def check(pair: Pair) -> list[Issue]:
    """Compare the method kinds (properties are property-method-mismatch's)."""
    if pair.base.is_property or pair.override.is_property:
        return []
    if not kind_breaks_callers(pair.base, pair.override):
        return []  # instance -> class/static keeps `self.m(...)` working
    fields = (("kind", _KIND_WORDS[pair.override.kind]), ("base_kind", _KIND_WORDS[pair.base.kind]))
    return [Issue((), fields)]
