"""Bisect driver: name the commit that broke a check, without touching the user's tree.

Public API::

    from harness.bisect import bisect, named_check, command_check

    report = bisect(Path("vllm"), "v0.8.5", "main", named_check("overrides"), retries=1)
    report.first_bad, report.steps, report.skipped

From the shell: ``harness bisect --repo PATH --good REV --bad REV (--check NAME | -- CMD ARGS...)``.
Imports no torch.
"""

from __future__ import annotations

from harness.bisect.checks import BisectCheck, command_check, named_check
from harness.bisect.driver import bisect
from harness.bisect.report import BisectReport
from harness.bisect.verdict import Verdict

__all__ = ["BisectCheck", "BisectReport", "Verdict", "bisect", "command_check", "named_check"]
