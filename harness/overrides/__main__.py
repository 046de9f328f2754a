"""``python -m harness.overrides ...``: ``harness overrides`` without the rest of the CLI (whose
other subcommands import torch), for pre-commit hooks and CI steps that must start fast."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from harness.errors import HarnessError
from harness.overrides.cli import register


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` as ``harness overrides`` arguments and run the checker."""
    parser = argparse.ArgumentParser(prog="harness", add_help=False)
    subparsers = parser.add_subparsers()
    register(subparsers)
    args = parser.parse_args(["overrides", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args))
    except HarnessError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    status = main()
    with contextlib.suppress(OSError, ValueError):  # run() already reported a failed write
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(status)  # skip interpreter teardown of the tree's objects (as mypy does)
