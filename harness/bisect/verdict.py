"""``git bisect run``'s exit-code contract, as named constants, and a step's verdict.

A check's exit status says what a commit is: :data:`EXIT_GOOD` (0) good, :data:`EXIT_SKIP` (125)
cannot be tested, any other status from :data:`EXIT_BAD_MIN` to :data:`EXIT_BAD_MAX` (1-127) bad,
and anything else (128 and above, or killed by a signal) aborts the whole bisection.
"""

from __future__ import annotations

from enum import Enum

EXIT_GOOD = 0
EXIT_SKIP = 125
"""The commit cannot be tested (it does not build, the check cannot set up)."""
EXIT_BAD_MIN = 1
EXIT_BAD_MAX = 127


class Verdict(str, Enum):
    """What one step decided about its commit."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"
    ABORT = "abort"


def verdict_of(returncode: int) -> Verdict:
    """The verdict ``git bisect run`` gives an exit status (negative: killed by a signal)."""
    if returncode == EXIT_GOOD:
        return Verdict.GOOD
    if returncode == EXIT_SKIP:
        return Verdict.SKIP
    if EXIT_BAD_MIN <= returncode <= EXIT_BAD_MAX:
        return Verdict.BAD
    return Verdict.ABORT
