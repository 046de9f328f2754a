"""``harness overrides``: parse arguments, call :func:`harness.overrides.checker.check`, print. The
checker is imported only when the subcommand runs.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.overrides.checker import CheckOptions
    from harness.overrides.findings import Finding

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2
"""A usage error, an output that cannot be written, or a bug in the checker."""

_FORMATS = ("text", "json", "sarif", "github")


class _OneLineErrors(argparse.ArgumentParser):
    """Usage errors as one line on standard error (exit 2), without the long usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see --help)\n")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add the ``overrides`` subcommand."""
    parser = subparsers.add_parser(
        "overrides",
        help="strict override checker: signature drift between base and subclass methods",
        description=(
            "Report methods whose signature drifts from the base-class method they override. "
            "Findings proven by a call in the project that would raise TypeError are errors; "
            "other drift is a warning. Never imports the scanned code."
        ),
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files or directories forming the tree (default: .)",
    )
    parser.add_argument(
        "--changed",
        nargs="*",
        metavar="PATH",
        help="check only the classes of these files (a directory: every file under it; a "
        "deleted file: the classes that imported from it) and all their subclasses in the tree; "
        "with no PATH of its own, the positional paths are the changed files and the tree is "
        "the working directory (how the pre-commit hook passes them, after any args:)",
    )
    parser.add_argument(
        "--format", choices=_FORMATS, default="text", help="output format (default: text)"
    )
    parser.add_argument(
        "--fail-on",
        choices=("error", "warning"),
        help="exit 1 when a finding at or above this severity remains (default: fail-on in "
        "the configuration, else error)",
    )
    parser.add_argument(
        "--select",
        "--enable",
        dest="select",
        action="append",
        default=[],
        metavar="CODE",
        help="enable an optional rule (see --list-rules); repeat or comma-separate",
    )
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="CODE",
        help="do not report this rule's findings; repeat or comma-separate",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        metavar="GLOB",
        help="leave out matching files and directories instead of the configured and default "
        "exclusions (a name like 'build' or 'modular_*.py', or a path like 'src/gen/*.py'); "
        "repeat for several",
    )
    parser.add_argument(
        "--extend-exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="leave out matching files and directories as well; repeat for several",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="read settings from this file (default: the nearest pyproject.toml above the "
        "scanned paths with a [tool.harness.overrides] table)",
    )
    parser.add_argument("--isolated", action="store_true", help="ignore every configuration file")
    parser.add_argument(
        "--baseline", metavar="FILE", help="report only findings not in this baseline"
    )
    parser.add_argument(
        "--write-baseline",
        metavar="FILE",
        help="write all current findings to FILE (dropping stale entries) and exit 0",
    )
    parser.add_argument(
        "--since",
        metavar="REF",
        help="report only the findings added since the git revision REF (its tree is checked "
        "in a temporary directory, cached by tree hash; the checkout is not touched)",
    )
    parser.add_argument(
        "--show",
        choices=("blocking", "warnings"),
        default="blocking",
        help="when a --changed or --since run blocks: list only the findings that block, the "
        "rest as a one-line count (blocking, the default), or the rest after them (warnings)",
    )
    parser.add_argument("--explain", metavar="CODE", help="print a rule's documentation and exit")
    parser.add_argument("--list-rules", action="store_true", help="list all rules and exit")
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="cache directory (default: $XDG_CACHE_HOME/harness/<project> if set, else "
        ".harness_cache in the project root of the scanned paths); summaries of installed "
        "packages are shared by all projects in $XDG_CACHE_HOME/harness/installed "
        "(~/.cache when unset)",
    )
    parser.add_argument("--no-cache", action="store_true", help="do not read or write any cache")
    parser.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="parser processes, at most the CPUs this process may use (default: up to 8)",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="read installed packages' bases from this environment: an interpreter, a virtual "
        "environment or a directory of packages (default: the standard library only)",
    )
    parser.add_argument("--statistics", action="store_true", help="print run statistics to stderr")
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="exit 0 when no Python file is left to check (default: a usage error, exit 2)",
    )
    parser.set_defaults(func=run)
    parser.__class__ = _OneLineErrors  # the parent parser picks the class of its subparsers


def _codes(values: list[str]) -> frozenset[str]:
    if not values:  # the rule modules are imported only when a code is named (warm runs)
        return frozenset()
    from harness.overrides.rules import get

    return frozenset(
        get(part).code for value in values for part in value.split(",") if part.strip()
    )


def _options(args: argparse.Namespace) -> tuple[CheckOptions, str]:
    """The run's options: command-line flags over the project's configuration file."""
    from harness.overrides.checker import CheckOptions
    from harness.overrides.config import settings, working_directory

    cwd = working_directory()
    config, excluder = settings([*args.paths, *(args.changed or ())], cwd, args)
    options = CheckOptions(
        select=_codes([*config.select, *args.select]),
        cache_dir=None if args.no_cache else (args.cache_dir or ""),
        jobs=args.jobs,
        baseline=None if args.write_baseline else (args.baseline or config.baseline),
        excluder=excluder,
        ignore=_codes([*config.ignore, *args.ignore]),
        python=config.python if args.python is None else args.python,
    )
    return options, args.fail_on or config.fail_on or "error"


def run(args: argparse.Namespace) -> int:
    """Execute ``harness overrides``; returns the exit code."""
    from harness.overrides import report

    if args.list_rules:
        return _emit(report.list_rules())
    if args.explain:
        from harness.overrides.rules import get

        return _emit(f"{get(args.explain).doc}\n")  # the doc opens with "CODE symbol"
    if args.jobs is not None and args.jobs < 1:
        raise HarnessError("--jobs must be at least 1")
    if args.write_baseline and args.changed is not None:
        raise HarnessError("--write-baseline needs a whole-tree run (without --changed)")
    if args.since is not None and (args.changed is not None or args.write_baseline):
        raise HarnessError("--since needs a whole-tree run (without --changed or --write-baseline)")

    from harness.overrides.checker import check
    from harness.overrides.findings import Severity

    options, fail_on_name = _options(args)
    paths, changed = list(args.paths), args.changed  # changed None: a whole-tree run
    if changed == []:  # a bare --changed: the positional paths are the changed files
        paths, changed = [], paths
    try:
        result = check(paths, changed=changed, options=options)
    except HarnessError:
        raise
    except Exception:  # a bug in the checker: report it, but never as "findings" (exit 1)
        traceback.print_exc()
        print("harness overrides: internal error (please report it)", file=sys.stderr)
        return EXIT_ERROR
    if not result.stats.files and not result.findings and changed is None and not args.allow_empty:
        raise HarnessError(nothing_to_check(paths or ["."]))
    if args.write_baseline:
        _write_baseline(args.write_baseline, result.findings)
        return EXIT_OK
    if args.since is not None:
        from harness.overrides.since import added_since

        result = added_since(result, args.since, paths, options, args)
    fail_on = Severity(fail_on_name)
    shown, rest = list(result.findings), 0
    focused = changed is not None or args.since is not None
    if focused and args.format in ("text", "github") and result.failed(fail_on):
        shown = [f for f in result.findings if f.severity.rank >= fail_on.rank]
        others = [f for f in result.findings if f.severity.rank < fail_on.rank]
        if args.show == "warnings":
            shown += others
        else:
            rest = len(others)
    out = report.render(shown, args.format)
    if rest:
        out += (
            f"harness overrides: {rest} more finding(s) below --fail-on {fail_on_name} not "
            "shown (--show warnings lists them)\n"
        )
    written = _emit(out)
    if written != EXIT_OK:
        return written
    if args.statistics:
        s = result.stats
        print(
            f"harness overrides: {s.files} files ({s.parsed} parsed), {s.classes} classes, "
            f"{s.checked_classes} checked, {len(result.findings)} findings in {s.seconds:.3f}s"
            + (" (stored result of an identical run reused)" if s.reused else ""),
            file=sys.stderr,
        )
        if s.environment:
            print(f"harness overrides: {s.environment}", file=sys.stderr)
    for path in result.stats.excluded:
        print(f"harness overrides: {path} is excluded by the configuration", file=sys.stderr)
    if result.stats.missing:
        missing = ", ".join(result.stats.missing)
        print(f"harness overrides: not found; treated as deleted: {missing}", file=sys.stderr)
    return EXIT_FINDINGS if result.failed(fail_on) else EXIT_OK


def nothing_to_check(paths: Sequence[str]) -> str:
    """The error of a whole-tree run that found no Python file to scan."""
    return (
        f"no Python file to check under {', '.join(paths)} (none there, or the configuration "
        "excludes them all); pass --allow-empty if that is expected"
    )


def _write_baseline(path: str, findings: Sequence[Finding]) -> None:
    """Write the baseline, saying how many entries of the one it replaces were dropped."""
    from harness.overrides.baseline import read, stale, write

    try:
        before = read(path)
    except HarnessError:  # no usable baseline there yet
        before = None
    count = write(path, findings)
    dropped = (
        "" if before is None else f" ({len(stale(path, before, findings))} stale entries dropped)"
    )
    print(f"harness overrides: wrote {count} finding(s) to {path}{dropped}", file=sys.stderr)


def _emit(text: str) -> int:
    """Write ``text`` to standard output; an output that cannot take it is one line on standard
    error, exit 2, and standard output then points at the null device. Lone surrogates (non-UTF-8
    file names) are written back as their bytes."""
    out = sys.stdout
    try:
        out.flush()
        buffer = getattr(out, "buffer", None)
        if buffer is None:
            out.write(text)
            out.flush()
            return EXIT_OK
        encoding = out.encoding or "utf-8"
        try:
            data = text.encode(encoding, "surrogateescape")
        except UnicodeEncodeError:
            data = text.encode(encoding, "backslashreplace")
        view = memoryview(data)
        while view:  # a pipe closed mid-write shows as a short write, then as EPIPE
            written = buffer.write(view)
            if not written:
                raise OSError(errno.EIO, "the output accepts no more data")
            view = view[written:]
        buffer.flush()
    except OSError as exc:
        with contextlib.suppress(OSError, ValueError):  # so the final flush raises nothing more
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())
            os.close(null)
        reason = exc.strerror or type(exc).__name__
        print(f"harness overrides: error: cannot write the report: {reason}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK
