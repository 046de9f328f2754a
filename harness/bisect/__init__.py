"""Bisect driver: name the commit that broke a check, without touching the user's tree.

Public API::

    from harness.bisect import bisect, named_check, command_check

    report = bisect(Path("vllm"), "v0.8.5", "main", named_check("overrides"), retries=1)
    report.first_bad, report.steps, report.skipped

From the shell: ``harness bisect --repo PATH --good REV --bad REV (--check NAME | -- CMD ARGS...)``.
Modules: :mod:`~harness.bisect.verdict` (``git bisect run``'s exit-code contract),
:mod:`~harness.bisect.worktree` (git and the temporary worktree), :mod:`~harness.bisect.checks`
(what a step runs), :mod:`~harness.bisect.driver` (the loop), :mod:`~harness.bisect.report`.
Imports no torch.
"""

from __future__ import annotations

from harness.bisect.checks import BisectCheck, command_check, named_check
from harness.bisect.driver import bisect
from harness.bisect.report import BisectReport
from harness.bisect.verdict import Verdict

__all__ = ["BisectCheck", "BisectReport", "Verdict", "bisect", "command_check", "named_check"]
