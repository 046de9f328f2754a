"""HO109 property-method-mismatch

## What it does
Reports a property (``@property``, ``@functools.cached_property``, a project descriptor whose
``__get__`` returns what the function computes) overridden by a plain method, or the reverse. A
descriptor whose ``__get__`` binds the function (``fn.__get__(obj)``) reads as a method. A
property whose every ``return`` gives a callable with the method's call signature (a ``lambda``,
``self.<method>``, a module function) is no mismatch.

## Why it matters
``obj.x()`` on a property calls the property's value; ``obj.x`` on a method returns a bound
method instead of the value. Both fail far from the cause, like the hook vLLM PR #17483
reshaped in the base crashed only in the subclass that was not updated.

## Example
```python
class Base:
    @property
    def block_size(self): ...

class Sub(Base):
    def block_size(self): ...
```

## Use instead
Keep the kind: ``@property`` on ``def block_size(self): ...`` in ``Sub`` too.

## Limitations
A class attribute overriding a method is not reported, nor a method that a decorator replaces
by an object of a non-descriptor class (its calls are not the ``def``'s).

## References
- Python ``property`` and ``functools.cached_property``
"""

from __future__ import annotations

from harness.overrides.facts.returned import accepts
from harness.overrides.facts.signature import Signature
from harness.overrides.rules._facts import Issue, Pair

CODE = "HO109"
SYMBOL = "property-method-mismatch"
MESSAGE = "{override} is {kind} but {base} is {base_kind}"
DESCRIPTION = "A property overrides a method or a method overrides a property."
SUBJECT = Pair
DRIFT = True

_WORDS = {True: "a property", False: "a method"}


def _same_call(prop: Signature, method: Signature, prop_declares: bool) -> bool:
    """The property's value is always a callable the method stands in for (or the reverse):
    ``obj.name(...)`` works whichever of the two the class has."""
    params = method.explicit_params()
    return bool(prop.returns) and all(
        accepts(params, r) if prop_declares else accepts(r, params) for r in prop.returns
    )


def check(pair: Pair) -> list[Issue]:
    base, override = pair.base, pair.override
    if base.is_property is override.is_property:
        return []
    if base.is_property and _same_call(base, override, prop_declares=True):
        return []
    if override.is_property and _same_call(override, base, prop_declares=False):
        return []
    kinds = (("kind", _WORDS[override.is_property]), ("base_kind", _WORDS[base.is_property]))
    return [Issue((), kinds)]
