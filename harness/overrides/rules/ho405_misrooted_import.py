"""HO405 misrooted-import

## What it does
Reports a class whose base is imported from a dotted module name (``from pkg.base import
Base``) that no module of the scanned tree has, while a file of the tree would have that
name if another directory were an import root: the scan started below the directory the
code is written to be imported from.

## Why it matters
The checker names files as ``python -m`` would from the working directory and the project
root (a ``pyproject.toml``, ``setup.py``, ``setup.cfg``, ``.git`` or ``.hg`` above the
scanned paths). A tree with none of those, checked from inside a namespace package
(``cd pkg && harness overrides .``), cannot resolve ``pkg.base``: the subclass's methods are
compared with nothing, and a renamed keyword such as the ``block_table`` /
``block_table_tensor`` drift of vLLM PR #17483 would pass without a word. This warning says
that the check was incomplete, and where it should start.

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
Only module names of two or more parts are matched against the tree's paths; a base
imported from a single name (``from utils import Base``) that matches nothing stays
unresolved without a warning, as do bases from packages that are not installed.

## References
- PEP 420 (implicit namespace packages)
- ``python -m`` and ``sys.path[0]``
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
