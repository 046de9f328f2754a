"""``harness bisect``: parse arguments, call :func:`harness.bisect.bisect`, print the report.

Exit 0: the first bad commit was found (and the check fails there and passes at its parent);
1: no single first bad commit (only skipped commits left), the check passes at ``--bad``, or it did
not confirm the commit; 2: usage; 3: the check aborted the bisection (exit status 128 or more, or
a command that cannot be executed); 130: interrupted.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from types import FrameType

_EXITS = (
    "Exit 0: the first bad commit was found (the check fails there and passes at its parent); "
    "1: no single first bad commit, the check passes at --bad, or not confirmed; 2: usage; "
    "3: aborted by the check (or it cannot be executed); 130: interrupted."
)
EXIT_FOUND = 0
EXIT_NOT_FOUND = 1
EXIT_ABORTED = 3


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add the ``bisect`` subcommand."""
    parser = subparsers.add_parser(
        "bisect",
        help="find the commit that broke a check, in a temporary worktree",
        description="Bisect GOOD..BAD of a git repository with a named check or a command "
        "(exit 0 good, 125 skip, 1-127 bad, else abort), in a temporary worktree: the "
        "repository's working tree, index and HEAD are never touched. " + _EXITS,
        usage="harness bisect --repo PATH --good REV --bad REV (--check NAME | -- CMD ARGS...) "
        "[--timeout S] [--retries N] [--json]",
    )
    parser.add_argument("--repo", required=True, metavar="PATH", help="the git repository")
    parser.add_argument(
        "--good", required=True, metavar="REV", help="a commit where the check passes"
    )
    parser.add_argument("--bad", required=True, metavar="REV", help="a later commit where it fails")
    parser.add_argument(
        "--check",
        metavar="NAME",
        help="overrides (an error finding is bad), pytest:EXPR (a node id or -k expression), "
        "or regressions (this project's catalog)",
    )
    parser.add_argument(
        "--timeout", type=float, metavar="S", help="seconds per check run (then skip)"
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=0,
        metavar="N",
        help="re-run a failing check up to N times (at most 100); one pass = flaky, good",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("command", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def _terminated(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from harness.bisect import bisect, command_check, named_check
    from harness.errors import HarnessError

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if bool(args.check) == bool(command):
        raise HarnessError("give exactly one check: --check NAME or -- CMD ARGS...")
    check = named_check(args.check) if args.check else command_check(command)
    previous = signal.signal(signal.SIGTERM, _terminated)  # clean up the worktree on SIGTERM too
    try:
        report = bisect(
            Path(args.repo),
            args.good,
            args.bad,
            check,
            timeout=args.timeout,
            retries=args.retries,
            progress=lambda message: print(f"bisect: {message}", file=sys.stderr, flush=True),
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format())
    if report.status == "aborted":
        return EXIT_ABORTED
    return EXIT_FOUND if report.confirmed else EXIT_NOT_FOUND
