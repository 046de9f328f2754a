"""``harness demo``: run a small named scenario through the reference runner and check the oracle.

For every step it prints, per KV cache group, each request's block-table row and slots and a
summary of the metadata the group's builder built; then it says whether paged attention through
that metadata matched a dense forward of every request (:func:`harness.demo_report.demo`).
Exit 0 when it did, 1 when it did not.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo",
        help="run a small scenario through the reference runner and check the oracle",
        description=__doc__,
    )
    parser.add_argument(
        "--scenario",
        help="a named scenario (an unknown name lists them; default: a hybrid full + "
        "sliding-window model through prefill and decode)",
    )
    parser.add_argument(
        "--backend",
        help="attention backend for every group, e.g. FLASH_ATTN or FLASHINFER "
        "(an unknown name lists them; default: the scenario's)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: registering the command must not import torch.
    from rich.console import Console

    from harness.demo_report import demo
    from harness.reference.backends import get_attn_backend
    from harness.reference.scenarios import DEFAULT_SCENARIO, get_scenario

    scenario = get_scenario(args.scenario or DEFAULT_SCENARIO)
    if args.backend is not None:
        get_attn_backend(args.backend)  # an unknown name fails here, listing the known ones
    return demo(scenario.name, args.backend, Console())
