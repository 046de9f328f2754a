"""``harness hunt [PATH]``: run the hunt (:func:`harness.hunt.job.hunt`), print the summary table,
write the reports. Exit 0 when every check behaved and PATH holds no proven crash, 1 otherwise,
2 on usage errors (bad device list, an output directory that cannot be written, a tree with no
Python file to check), found before any work."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import HarnessError
from harness.paths import writable_directory

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
        "--allow-empty",
        action="store_true",
        help="accept a PATH with no Python file left to check (default: a usage error)",
    )
    parser.add_argument(
        "--vllm-src",
        type=Path,
        default=None,
        metavar="PATH",
        help="also hunt in this vLLM tree (a checkout or a wheel's .py files): the override "
        "checker on it and the scaling detector on its own attention builders",
    )
    parser.add_argument(
        "--out",
        default="reports",
        metavar="DIR",
        help="report directory (default: reports)",
    )
    parser.set_defaults(func=run)


def parse_devices(text: str | None) -> tuple[str, ...]:
    """``--devices``: ``None`` for the defaults, ``all``, or a comma-separated list of known
    profiles, each once; anything else is a :class:`HarnessError`."""
    from harness.hunt.job import DEFAULT_DEVICES
    from harness.memory.devices import DEVICE_PROFILES, get_device_profile

    if text is None:
        return DEFAULT_DEVICES
    if text.strip() == "all":
        return tuple(sorted(DEVICE_PROFILES))
    if not text.strip():
        raise HarnessError(f"--devices {text!r}: no device named (use 'all' or NAME,NAME,...)")
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise HarnessError(f"--devices {text!r}: empty device name in the list")
    for i, name in enumerate(names):
        if name in names[:i]:
            raise HarnessError(f"--devices {text!r}: {name} twice")
        try:
            get_device_profile(name)
        except HarnessError as exc:
            raise HarnessError(f"--devices: {exc}") from None
    return tuple(names)


def run(args: argparse.Namespace) -> int:
    from harness.overrides.config import working_directory

    working_directory()  # before torch: its import dies in a deleted directory
    devices = parse_devices(args.devices)
    out = writable_directory(args.out, "--out")
    if args.path is not None and not args.path.exists():
        raise HarnessError(f"{args.path}: no such file or directory")
    if args.vllm_src is not None:
        from harness.vllm_tree.tree import locate_tree

        locate_tree(args.vllm_src)  # a bad tree is a usage error before any work

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from harness.hunt import job
    from harness.hunt.report import summary_table, verdict_line, write_reports

    if args.path is not None and not args.allow_empty and not job.overrides_files(args.path):
        from harness.overrides.cli import nothing_to_check

        raise HarnessError(nothing_to_check([str(args.path)]))
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

        report = job.hunt(
            args.path,
            devices=devices,
            quick=args.quick,
            allow_empty=args.allow_empty,
            progress=show,
            vllm_src=args.vllm_src,
        )
    console.print(summary_table(report))
    written = write_reports(report, out)
    console.print(verdict_line(report))
    console.print("reports: " + ", ".join(str(p) for p in written))
    return EXIT_OK if report.ok else EXIT_FAILED
