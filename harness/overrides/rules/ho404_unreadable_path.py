"""HO404 unreadable-path

## What it does
Reports a file or directory inside the scanned tree that cannot be read: a symlink loop, a
dangling symlink, a permission error.

## Why it matters
Skipping a file silently would hide its classes: a base like vLLM's
``MLACommonMetadataBuilder`` (PR #17483) in an unreadable file would leave its subclasses
unchecked unnoticed.

## Example
``vllm/loop -> vllm`` (a symlink to its own parent).

## Use instead
Remove the loop, fix the permissions, or pass narrower paths.

## Limitations
A path given on the command line that does not exist is a usage error (exit 2), not HO404.

## References
- ``os.scandir``
"""

from __future__ import annotations

from harness.overrides.discover import Unreadable
from harness.overrides.rules._facts import Issue

CODE = "HO404"
SYMBOL = "unreadable-path"
MESSAGE = "{reason}"
DESCRIPTION = "A file or directory in the tree cannot be read (symlink loop, permissions)."
SUBJECT = Unreadable


def check(path: Unreadable) -> list[Issue]:
    return [Issue((), (("reason", path.reason),), key=path.reason)]
