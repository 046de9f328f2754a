"""HO402 cyclic-inheritance

## What it does
Reports a class whose bases lead back to itself (``class A(A)``, or ``A(B)`` and ``B(A)``
across modules).

## Why it matters
Importing such a module raises ``NameError``/``TypeError``; the checker cannot compute an MRO
and skips the class, which for a hierarchy like vLLM PR #17483's ``MLACommonMetadataBuilder``
must not happen silently.

## Example
```python
class MLACommonMetadataBuilder(MLACommonMetadataBuilder): ...
```

## Use instead
Inherit from the intended base class.

## Limitations
Only cycles through classes the checker can resolve are found.

## References
- Python tutorial, "Inheritance"
"""

from __future__ import annotations

from harness.overrides.model.tree import InheritanceCycle
from harness.overrides.rules._facts import Issue

CODE = "HO402"
SYMBOL = "cyclic-inheritance"
MESSAGE = "{cls} inherits from itself: {cycle}"
DESCRIPTION = "A class inherits from itself, directly or through other classes."
SUBJECT = InheritanceCycle


def check(cycle: InheritanceCycle) -> list[Issue]:
    path = " -> ".join(c.qualname for c in cycle.cycle)
    return [Issue((), (("cls", cycle.cls.qualname), ("cycle", path)))]
