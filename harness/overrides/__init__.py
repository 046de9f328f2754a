"""Strict override checker: signature drift between base and subclass methods.

Static and whole-tree: files are parsed with :mod:`ast`, never imported. ``check(paths,
changed=...)`` from Python, ``harness overrides [PATH...]`` from the shell; the pipeline is drawn in
``docs/architecture.md``.
"""

from __future__ import annotations

import os
import sys

if sys.argv[:1] == ["-m"]:  # runpy is importing this package to run harness.overrides.<...>
    # ``python -m`` put the working directory (usually the scanned tree) first on ``sys.path``:
    # take it off before anything imports ``ast`` from there.
    try:
        _cwd: str | None = os.getcwd()
    except OSError:
        _cwd = None
    if sys.path and sys.path[0] in ("", _cwd):
        del sys.path[0]

from harness.overrides.checker import CheckOptions, CheckResult, Stats, check
from harness.overrides.findings import Evidence, Finding, Severity

__all__ = ["CheckOptions", "CheckResult", "Evidence", "Finding", "Severity", "Stats", "check"]
