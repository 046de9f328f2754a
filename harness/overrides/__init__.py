"""Strict override checker: signature drift between base and subclass methods.

Static and whole-tree: files are parsed with :mod:`ast`, never imported. Public API::

    from harness.overrides import CheckOptions, check

    result = check(["vllm"], changed=["vllm/v1/attention/backends/mla/common.py"])
    for finding in result.findings: ...

From the shell: ``harness overrides [PATH...] [--changed FILE...]``, or
``python -m harness.overrides ...`` (same options, without the other subcommands' imports).

Pipeline (one module each): ``discover`` files -> ``summary`` per file (``signature``,
``callsites``; cached by ``cache``/``codec``) -> ``resolve`` classes and MROs -> ``compare``
and ``rules`` -> ``evidence`` (``binding`` simulates the call) -> ``suppress`` -> ``baseline``
-> ``report``; ``checker`` orchestrates and ``results`` reuses identical runs.
"""

from __future__ import annotations

from harness.overrides.checker import CheckOptions, CheckResult, Stats, check
from harness.overrides.findings import Evidence, Finding, Severity

__all__ = ["CheckOptions", "CheckResult", "Evidence", "Finding", "Severity", "Stats", "check"]
