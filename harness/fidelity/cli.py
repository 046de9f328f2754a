"""``harness fidelity``: differential tests of the reference against vLLM's own source.

Registration imports nothing heavy; torch and the differentials load when the command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],  # pyright: ignore[reportPrivateUsage]
) -> None:
    """Add the ``fidelity`` subcommand."""
    parser = subparsers.add_parser(
        "fidelity",
        help="differential tests of the reference against vLLM's source",
        description="Run vLLM's own code (loaded from its source, on CPU, with stubs for the rest "
        "of vLLM) and the reference on random inputs with a fixed seed; compare exactly; shrink "
        "any disagreement. Against a later vLLM than the reference's 0.9.0, its changes are named "
        "deviations (file:line) where docs/fidelity.md lists them for that version. Exit 0 when "
        "every differential agrees on every trial beyond listed deviations, 1 otherwise, 2 on bad "
        "input (not a vLLM tree, a tree outside the supported API eras).",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--vllm-src",
        type=Path,
        metavar="DIR",
        help="a vLLM source tree (the directory holding the vllm package)",
    )
    where.add_argument(
        "--vllm-version",
        metavar="VERSION",
        help="download this vLLM wheel with pip (once) and unpack its Python sources into the "
        "cache, e.g. 0.9.0",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="where --vllm-version unpacks (default: $XDG_CACHE_HOME/harness or ~/.cache/harness)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    parser.add_argument(
        "--trials", type=int, default=None, help="trials per differential (default: each its own)"
    )
    parser.add_argument(
        "--only", action="append", metavar="NAME", help="run only this differential (repeatable)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Locate or fetch the source, run the differentials, print the report."""
    from harness.errors import HarnessError
    from harness.fidelity.differentials import DIFFERENTIALS
    from harness.fidelity.report import format_report
    from harness.fidelity.suite import run_fidelity, select
    from harness.vllm_tree.fetch import fetch_vllm_source
    from harness.vllm_tree.tree import locate_tree

    differentials = select(DIFFERENTIALS, args.only)
    if args.vllm_src is not None:
        tree = locate_tree(args.vllm_src)
    else:
        tree = fetch_vllm_source(args.vllm_version, args.cache_dir)
    if tree.version is None:
        raise HarnessError(
            f"--vllm-src {tree.root}: no __version__ in vllm/_version.py (a wheel or a built "
            "checkout has one); deviations are listed by vLLM version"
        )
    report = run_fidelity(tree, differentials, seed=args.seed, trials=args.trials)
    print(format_report(report))
    return 0 if report.ok else 1
