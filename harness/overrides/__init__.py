"""Strict override checker: signature drift between base and subclass methods.

Static and whole-tree: files are parsed with :mod:`ast`, never imported. Public API::

    from harness.overrides import CheckOptions, check

    result = check(["vllm"], options=CheckOptions(cache_dir=None))
    for finding in result.findings: ...
"""

from __future__ import annotations

from harness.overrides.checker import CheckOptions, CheckResult, Stats, check
from harness.overrides.findings import Evidence, Finding, Severity

__all__ = ["CheckOptions", "CheckResult", "Evidence", "Finding", "Severity", "Stats", "check"]
