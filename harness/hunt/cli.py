"""``harness hunt [PATH]``: run the hunt (:func:`harness.hunt.job.hunt`), print the summary table,
write the reports. Exit 0 when every check behaved and PATH holds no proven crash, else 1."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add the ``hunt`` subcommand."""
    parser = subparsers.add_parser(
        "hunt",
        help="the main job: override checker, catalog, scaling detector, gsm8k OOM and budgets",
        description=__doc__,
    )
    parser.add_argument(
        "path",
        nargs="?",
        type=Path,
        metavar="PATH",
        help="tree for the override checker (default: this package's reference implementation)",
    )
    parser.add_argument(
        "--devices",
        default=None,
        metavar="NAMES",
        help="comma-separated device profiles for the gsm8k runs, or 'all' (default: h100-95,b200)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="bounded runs: scaling over the first 2 steps, each gsm8k run over its first step",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("reports"),
        metavar="DIR",
        help="report directory (default: reports)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.errors import HarnessError
    from harness.hunt.job import DEFAULT_DEVICES, hunt
    from harness.hunt.report import summary_table, verdict_line, write_reports
    from harness.memory.devices import DEVICE_PROFILES

    if args.path is not None and not args.path.exists():
        raise HarnessError(f"{args.path}: no such file or directory")
    devices: tuple[str, ...]
    if args.devices is None:
        devices = DEFAULT_DEVICES
    elif args.devices == "all":
        devices = tuple(sorted(DEVICE_PROFILES))
    else:
        devices = tuple(d.strip() for d in args.devices.split(",") if d.strip())
    console = Console(width=None if sys.stdout.isatty() else 160)
    with Progress(
        TextColumn("[bold]hunt[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=Console(stderr=True),
        transient=True,
        disable=not sys.stderr.isatty(),
    ) as progress:
        task = progress.add_task("starting", total=None)

        def show(what: str, done: int, total: int) -> None:
            progress.update(task, description=what, completed=done, total=total)
            if not sys.stderr.isatty():
                print(f"hunt [{done}/{total}] {what}", file=sys.stderr, flush=True)

        report = hunt(args.path, devices=devices, quick=args.quick, progress=show)
    console.print(summary_table(report))
    written = write_reports(report, args.out)
    console.print(verdict_line(report))
    console.print("reports: " + ", ".join(str(p) for p in written))
    return EXIT_OK if report.ok else EXIT_FAILED
