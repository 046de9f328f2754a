"""HO109 property-method-mismatch

## What it does
Reports a property (``@property``, ``@functools.cached_property``, or a project descriptor
class whose ``__get__`` returns what the function computes, like SQLAlchemy's
``memoized_property`` or Django's ``cached_property``) overridden by a plain method, or a
method overridden by a property. A descriptor whose ``__get__`` binds the function
(``fn.__get__(obj)``, like SQLAlchemy's ``hybridmethod``) reads as a method.

## Why it matters
``obj.x()`` on a property calls the property's value; ``obj.x`` on a method returns a bound
method instead of the value. Both fail far from the cause. vLLM's builders and backends expose
configuration both ways (``get_name()`` methods next to properties); in the PR #17483 refactor
a hook that changed shape in the base crashed only in the subclass that was not updated.

## Example
```python
class Base:
    @property
    def block_size(self): ...

class Sub(Base):
    def block_size(self): ...
```

## Use instead
```python
class Sub(Base):
    @property
    def block_size(self): ...
```

## Limitations
A class attribute overriding a method is not reported, nor a method that a decorator replaces
by an object of a non-descriptor class (its calls are not the ``def``'s).

## References
- Python ``property`` and ``functools.cached_property``
"""

from __future__ import annotations

from harness.overrides.rules._facts import Issue, Pair

CODE = "HO109"
SYMBOL = "property-method-mismatch"
MESSAGE = "{override} is {kind} but {base} is {base_kind}"
DESCRIPTION = "A property overrides a method or a method overrides a property."
ENABLED_BY_DEFAULT = True
SUBJECT = Pair
DRIFT = True


def _word(is_property: bool) -> str:
    return "a property" if is_property else "a method"


def check(pair: Pair) -> list[Issue]:
    """Compare property-ness."""
    if pair.base.is_property is pair.override.is_property:
        return []
    fields = (
        ("kind", _word(pair.override.is_property)),
        ("base_kind", _word(pair.base.is_property)),
    )
    return [Issue((), fields)]
