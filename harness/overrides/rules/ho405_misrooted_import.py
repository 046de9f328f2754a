"""HO405 misrooted-import

## What it does
Reports a class whose base is imported from a dotted module name (``from pkg.base import
Base``) that no module of the scanned tree has, while a file of the tree would have that
name from another import root: the scan started below the directory the code is imported from.

## Why it matters
Files are named as ``python -m`` would from the working directory and the project root (a
``pyproject.toml``, ``setup.py``, ``setup.cfg``, ``.git`` or ``.hg`` above the scanned paths).
From inside a namespace package without those, ``pkg.base`` is unresolved and the subclass is
compared with nothing: a drift like vLLM PR #17483's ``block_table`` would pass without a word.

## Example
```
proj/pkg/base.py     class Base: ...
proj/pkg/sub.py      from pkg.base import Base
                     class Sub(Base): ...
$ cd proj/pkg && harness overrides .
```

## Use instead
Run from the directory the imports are written for (``cd proj && harness overrides pkg``),
or mark the project root with a ``pyproject.toml``.

## Limitations
Only module names of two or more parts are matched against the tree's paths; a base from a
single name (``from utils import Base``) or from a package that is not installed stays
unresolved without a warning.

## References
- PEP 420 (implicit namespace packages); ``python -m`` and ``sys.path[0]``
"""

from __future__ import annotations

from harness.overrides.model.tree import MisrootedBase
from harness.overrides.rules._facts import Issue

CODE = "HO405"
SYMBOL = "misrooted-import"
MESSAGE = (
    "base {base} of {cls} is imported from {module!r}, which is no module of the scanned tree; "
    "{path} is {module!r} from the import root {root}: {cls}'s methods were not compared with "
    "its base's (run from that root, or mark it with a pyproject.toml)"
)
DESCRIPTION = "A base class's module is in the tree but named from another import root."
SUBJECT = MisrootedBase


def check(problem: MisrootedBase) -> list[Issue]:
    """Every such base is reported, with the file and the import root it needs."""
    fields = (
        ("base", problem.base),
        ("cls", problem.cls.qualname),
        ("module", problem.module),
        ("path", problem.file.display),
        ("root", problem.root),
    )
    return [Issue((), fields, key=problem.module)]
