"""``harness regressions``: list the catalog, show one entry, verify entries (thin: parse, call, print).

- ``list`` (or no subcommand) -- one line per entry: id, upstream references, bug class.
- ``show ID`` -- everything about one entry: references with links, variants, checks, how it was
  found upstream, what test would have caught it, and its story.
- ``verify [ID ...] [--json]`` -- run every check on the buggy and the fixed variant (all entries
  by default); exit 0 when every entry behaves, 1 when one misbehaves, 2 on usage errors. A user
  backend (``--regression MODULE:ATTR``) runs the generic checks; exit 1 when one fails. User
  code runs in a child process per spec (:mod:`harness.regressions.isolated`), so that even an
  ``os._exit()`` in it is a check error; ``--in-process`` runs it here.

Every ``ID`` may also be ``MODULE:ATTR`` naming a ``Regression`` (or, for ``verify``, an
attention backend) in the user's own code; ``--regression`` is a synonym for a positional ``ID``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.regressions.entry import Regression, Variant
    from harness.regressions.verify import VerifyResult

EXIT_OK = 0
EXIT_MISBEHAVES = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add ``harness regressions`` and its subcommands."""
    parser = subparsers.add_parser(
        "regressions",
        help="the catalog of real regressions: list, show one, verify the checks catch them",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(func=_list, json=False)  # bare `harness regressions` lists
    sub = parser.add_subparsers(dest="regressions_command", metavar="SUBCOMMAND")

    listing = sub.add_parser("list", help="one line per entry")
    listing.add_argument("--json", action="store_true", help="print a JSON list")
    listing.set_defaults(func=_list)

    show = sub.add_parser("show", help="everything about one entry")
    show.add_argument("id", nargs="?", metavar="ID", help="entry id or MODULE:ATTR")
    show.add_argument("--regression", metavar="NAME|MODULE:ATTR", help="same as ID")
    show.set_defaults(func=_show)

    verify = sub.add_parser(
        "verify",
        help="checks must fail on each buggy variant and pass on each fixed one",
        description="Exit 0: every entry behaves; 1: one misbehaves (or a user backend fails a "
        "check); 2: usage.",
    )
    verify.add_argument("ids", nargs="*", metavar="ID", help="entries (default: all)")
    verify.add_argument(
        "--regression",
        action="append",
        default=[],
        metavar="NAME|MODULE:ATTR",
        help="an entry, or a user attention backend to run the generic checks on (repeatable)",
    )
    verify.add_argument("--json", action="store_true", help="print a JSON list, one object each")
    verify.add_argument(
        "--in-process",
        action="store_true",
        help="run user code (MODULE:ATTR) in this process: one interpreter start faster per "
        "spec, but an os._exit() in it ends the whole run (default: a child process per spec)",
    )
    verify.set_defaults(func=_verify)


def _list(args: argparse.Namespace) -> int:
    from harness.regressions import REGRESSIONS

    entries = list(REGRESSIONS.values())
    if args.json:
        print(json.dumps([_summary(r) for r in entries], indent=2))
        return EXIT_OK
    width = max(len(r.id) for r in entries)
    for r in entries:
        refs = ", ".join(f"#{u.number}" for u in r.upstream) or "-"
        print(f"{r.id:<{width}}  {refs:<16}  {r.bug_class}")
    return EXIT_OK


def _summary(regression: Regression) -> dict[str, object]:
    return {
        "id": regression.id,
        "title": regression.title,
        "upstream": [
            {"kind": u.kind, "number": u.number, "role": u.role, "url": u.url}
            for u in regression.upstream
        ],
        "bug_class": regression.bug_class,
        "component": regression.component,
        "checks": [c.name for c in regression.checks],
    }


def _show(args: argparse.Namespace) -> int:
    from harness.regressions.resolve import resolve_regression

    spec = args.regression or args.id
    if spec is None or (args.regression and args.id):
        raise HarnessError("regressions show takes one ID (or --regression)")
    print(format_entry(resolve_regression(spec)))
    return EXIT_OK


def format_entry(r: Regression) -> str:
    """The ``show`` text of one entry."""

    def qualified(variant: Variant) -> str:
        classes = (variant.backend, variant.runner)
        return " with runner ".join(f"{c.__module__}:{c.__qualname__}" for c in classes if c)

    lines = [
        f"{r.id}: {r.title}",
        "",
        "upstream:",
        *(f"  {u} ({u.url})" for u in r.upstream),
        f"bug class: {r.bug_class}",
        f"component: {r.component}",
        f"buggy:     {qualified(r.buggy)}",
        f"fixed:     {qualified(r.fixed)}",
        "checks (each must fail on buggy and pass on fixed):",
        *(f"  {c.name}: {c.description}" for c in r.checks),
        "",
        f"how it was found upstream: {r.found_upstream}",
        f"what would have caught it: {r.caught_by}",
    ]
    if r.doc.strip():
        lines += ["", r.doc.strip()]
    return "\n".join(lines)


def _verify(args: argparse.Namespace) -> int:
    from harness.regressions import REGRESSIONS, Variant
    from harness.regressions.isolated import verify_in_child
    from harness.regressions.resolve import is_import_spec, resolve_target
    from harness.regressions.verify import verify

    specs: Sequence[str] = [*args.ids, *args.regression]
    isolate = not args.in_process
    plan: list[Regression | tuple[str, Variant] | str] = []
    for spec in specs:  # ids resolve now (usage errors before any work); user code in its child
        if isolate and is_import_spec(spec):
            plan.append(spec)
            continue
        resolved = resolve_target(spec)
        plan.append((spec, resolved) if isinstance(resolved, Variant) else resolved)
    if not specs:
        plan = list(REGRESSIONS.values())
    progress = _progress() if sys.stderr.isatty() and not args.json else None
    results: list[VerifyResult] = []
    for item in plan:
        if isinstance(item, str):
            results.append(verify_in_child(item))
        else:
            results += verify([item], progress=progress)
    if progress is not None:
        sys.stderr.write("\r\033[K")
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        print(format_results(results))
    return EXIT_OK if all(r.ok for r in results) else EXIT_MISBEHAVES


def _progress() -> Callable[[str], None]:
    count = 0

    def show(message: str) -> None:
        nonlocal count
        count += 1
        sys.stderr.write(f"\r\033[K[{count}] {message}"[:200])
        sys.stderr.flush()

    return show


def _mark(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def format_results(results: Sequence[VerifyResult]) -> str:
    """A table of verification results, then the details of whatever misbehaved."""
    rows: list[tuple[str, str, str, str]] = [("id", "buggy detected", "fixed clean", "seconds")]
    details: list[str] = []
    for result in results:
        buggy, fixed = (
            ("-", "clean" if result.ok else "FAILS")
            if result.kind == "variant"
            else (_mark(result.buggy_detected), _mark(result.fixed_clean))
        )
        rows.append((result.id, buggy, fixed, f"{result.seconds:.2f}"))
        for run in result.runs:
            if not run.as_expected or result.kind == "variant":
                text = run.outcome.detail if run.outcome is not None else str(run.error)
                details.append(
                    f"{result.id} / {run.check} on {run.role}: {run.verdict}"
                    + ("" if run.as_expected else " (NOT AS EXPECTED)")
                    + "\n    "
                    + text.replace("\n", "\n    ")
                )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    table = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    bad = sum(1 for r in results if not r.ok)
    table.append(f"{len(results) - bad} of {len(results)} behave")
    return "\n".join(table + (["", *details] if details else []))
