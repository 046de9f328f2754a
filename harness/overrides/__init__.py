"""Strict override checker: signature drift between base and subclass methods.

Static and whole-tree: files are parsed with :mod:`ast`, never imported. ``check(paths,
changed=...)`` from Python, ``harness overrides [PATH...]`` from the shell; the pipeline is drawn in
``docs/architecture.md``.
"""

from __future__ import annotations

import os
import sys


def _drop_working_directory() -> None:
    """``python -m harness.overrides`` put the working directory (usually the scanned tree)
    first on ``sys.path``: take it off before anything imports ``ast`` from there."""
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    if sys.path and sys.path[0] in ("", cwd):
        del sys.path[0]


if sys.argv[:1] == ["-m"]:  # runpy is importing this package to run harness.overrides.<...>
    _drop_working_directory()

from harness.overrides.checker import CheckOptions, CheckResult, Stats, check  # noqa: E402
from harness.overrides.findings import Evidence, Finding, Severity  # noqa: E402

__all__ = ["CheckOptions", "CheckResult", "Evidence", "Finding", "Severity", "Stats", "check"]
