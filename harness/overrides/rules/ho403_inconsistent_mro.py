"""HO403 inconsistent-mro

## What it does
Reports a class whose bases admit no C3 linearisation (``class C(A, B)`` where ``B`` already
derives from ``A``).

## Why it matters
Python raises ``TypeError: Cannot create a consistent method resolution order (MRO)`` at
import time; the checker skips the class. Mixin hierarchies like vLLM's MLA builders (vLLM PR
#17483) depend on base order.

## Example
```python
class A: ...
class B(A): ...
class C(A, B): ...
```

## Use instead
Drop the redundant base: ``class C(B): ...``.

## Limitations
Only classes the checker can resolve take part. A base is resolved as Python does when the
``class`` statement runs: by the import in force at that line, not by a class of the same name
defined further down.

## References
- "The Python 2.3 Method Resolution Order" (C3)
"""

from __future__ import annotations

from harness.overrides.model.tree import NoLinearization
from harness.overrides.rules._facts import Issue

CODE = "HO403"
SYMBOL = "inconsistent-mro"
MESSAGE = "cannot create a consistent method resolution order for {cls} (bases {bases})"
DESCRIPTION = "A class's bases have no consistent C3 method resolution order."
SUBJECT = NoLinearization


def check(problem: NoLinearization) -> list[Issue]:
    bases = ", ".join(b.qualname for b in problem.bases)
    return [Issue((), (("cls", problem.cls.qualname), ("bases", bases)))]
