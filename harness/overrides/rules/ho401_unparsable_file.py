"""HO401 unparsable-file

## What it does
Reports a file the checker cannot parse: a syntax error, a NUL byte, undecodable bytes, or
nesting too deep for the parser. The rest of the tree is still checked.

## Why it matters
A class in an unparsable file is invisible: its overrides are not checked, and subclasses
elsewhere lose their base. vLLM's tree contains generated and vendored files; one broken file
must not hide a ``_build_decode``-style crash (vLLM PR #17483) in the others.

## Example
```python
class Broken(
```

## Use instead
Fix the file, or exclude it from the paths passed to ``harness overrides``.

A file the running interpreter cannot parse because it uses a newer grammar (``def f[T]()``
and ``type X = ...`` need 3.12, ``class C[T = int]`` 3.13, ``except A, B:`` and ``t"..."``
3.14) is reported as such: the message names the Python version it needs, the construct and
its line, and the version the checker runs on. Run the checker with that Python.

## Limitations
Reported at warning severity where the parser stopped (the syntax error, the NUL byte, the
undecodable byte; line 1 when nesting is too deep to say); fails the run only with
``--fail-on warning``.

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
