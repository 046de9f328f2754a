"""HO401 unparsable-file

## What it does
Reports a file the checker cannot parse: a syntax error, a NUL byte, undecodable bytes, or
nesting too deep for the parser. The rest of the tree is still checked.

## Why it matters
A class in an unparsable file is invisible: its overrides are not checked, and subclasses
elsewhere lose their base. One broken generated or vendored file in vLLM's tree must not hide a
``_build_decode``-style crash (vLLM PR #17483) in the others.

## Example
```python
class Broken(
```

## Use instead
Fix the file, or exclude it from the paths passed to ``harness overrides``. A file in a newer
grammar than the running interpreter's (``def f[T]()`` and ``type X = ...`` need 3.12, ``class
C[T = int]`` 3.13, ``except A, B:`` and ``t"..."`` 3.14) is reported with the version it needs,
the construct, its line and the checker's version: run the checker with that Python.

## Limitations
A warning where the parser stopped (line 1 when nesting is too deep to say); it fails the run
only with ``--fail-on warning``.

## References
- Python ``ast.parse``
"""

from __future__ import annotations

from harness.overrides.rules._facts import Issue
from harness.overrides.summary import ParseFailure

CODE = "HO401"
SYMBOL = "unparsable-file"
MESSAGE = "{reason}"
DESCRIPTION = "A file could not be parsed (syntax error, NUL byte, bad encoding, too deep)."
SUBJECT = ParseFailure


def check(failure: ParseFailure) -> list[Issue]:
    return [Issue((), (("reason", failure.reason),))]
