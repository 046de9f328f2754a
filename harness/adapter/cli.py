"""The engine adapter's commands (thin: parse, call the library, print).

* ``harness diff --base PATH --head PATH [--backend NAME ...]``: exit 0 when every compared
  backend behaves the same on both trees, 1 on the first difference (step, field, both values),
  2 on bad input or when no backend could be compared.
* ``harness memory scaling --vllm-src PATH [--backend NAME ...]``: exit 1 when an allocation of
  the tree's builders grows with ``num_blocks`` (``file:line``, op, bytes per block, once or every
  step), 0 otherwise, 2 when no backend could be driven or a named one cannot be.
* On either, a backend whose run the tree's code ended (``sys.exit``, ``os._exit``, a crash, an
  exception in a thread, past the time limit) is that backend's error: exit 1.
* ``--list-backends`` on either: which of the tree's backends run, and what stops the others.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

EXIT_OK = 0
EXIT_FOUND = 1
EXIT_USAGE = 2
DIFF_STEPS = 200
SCALING_STEPS = 200


def add_platform_arguments(parser: argparse.ArgumentParser, *, steps: bool = True) -> None:
    """The backends, ``--list-backends`` and the platform choices that decide a builder's
    path (each with its default); ``steps``: add ``--steps`` too."""
    from harness.adapter.platform import DEFAULT_CAPABILITY

    major, minor = DEFAULT_CAPABILITY
    parser.add_argument(
        "--backend",
        action="append",
        default=None,
        metavar="NAME",
        help="a backend of the tree, e.g. FLASHINFER (repeatable; default: FLASH_ATTN, "
        "FLASHINFER, FLEX_ATTENTION, TRITON_ATTN and the MLA backends the tree has)",
    )
    parser.add_argument(
        "--list-backends",
        action="store_true",
        help="list the tree's backends: which run on the CPU, and which import or call stops "
        "the others",
    )
    if steps:
        parser.add_argument(
            "--steps",
            type=int,
            default=None,
            metavar="N",
            help="serving steps to drive (default: 200)",
        )
    parser.add_argument("--seed", type=int, default=0, help="sequence seed (default: 0)")
    parser.add_argument(
        "--device-capability",
        default=f"{major}.{minor}",
        metavar="MAJOR.MINOR",
        help="the CUDA compute capability builders see (default: %(default)s, an H100)",
    )
    parser.add_argument(
        "--flash-attn-version",
        type=int,
        choices=(2, 3, 4),
        default=2,
        help="the FlashAttention version reported installed (default: %(default)s; FA3's "
        "scheduler metadata is a CUDA kernel build() would launch)",
    )
    parser.add_argument(
        "--flashinfer-trtllm",
        action="store_true",
        help="report FlashInfer's TRT-LLM kernels available (default: native FlashInfer kernels)",
    )


def add_scaling_arguments(parser: argparse.ArgumentParser) -> None:
    """``harness memory scaling``'s ``--vllm-src`` and the adapter's options."""
    parser.add_argument(
        "--vllm-src",
        type=Path,
        default=None,
        metavar="PATH",
        help="run the scaling detector on this vLLM tree's own builders (a checkout or a "
        "wheel's .py files: the directory holding vllm/); num_blocks are then the serving "
        "sequence's pool and twice that, --max-steps the steps driven (default: 200)",
    )
    add_platform_arguments(parser, steps=False)


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],  # pyright: ignore[reportPrivateUsage]
) -> None:
    """Add ``harness diff``."""
    parser = subparsers.add_parser(
        "diff",
        help="two vLLM trees' attention builders over one serving sequence: the first "
        "difference in metadata, reorder or exceptions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base", type=Path, required=True, metavar="PATH", help="the base tree")
    parser.add_argument("--head", type=Path, required=True, metavar="PATH", help="the head tree")
    add_platform_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=diff_command)


def platform_options(args: argparse.Namespace) -> Any:
    from harness.adapter.platform import PlatformOptions, parse_capability

    try:
        return PlatformOptions(
            device_capability=parse_capability(args.device_capability),
            flash_attn_version=args.flash_attn_version,
            flashinfer_trtllm=args.flashinfer_trtllm,
        )
    except ValueError as exc:
        raise HarnessError(f"--device-capability: {exc}") from None


def _steps(value: int | None, flag: str, default: int) -> int:
    steps = default if value is None else value
    if steps <= 0:
        raise HarnessError(f"{flag} must be positive, got {steps}")
    return steps


def _backends(tree: Any, names: list[str] | None) -> list[str]:
    from harness.adapter.backends import discover_backends, select_backends

    return [e.name for e in select_backends(discover_backends(tree), names, tree.label)]


def list_backends(tree: Any, options: Any, names: list[str] | None, seed: int) -> int:
    """Print which backends run; exit 0 when at least one does."""
    from harness.adapter.jobs import LIST_STEPS, job, run_job_in_child

    rows = run_job_in_child(
        job("list", tree, options, backends=names, steps=LIST_STEPS, seed=seed),
        f"listing the backends of {tree.label}",
    )
    print(f"{tree.label}: {len(rows)} backend(s), {options.describe()}")
    for row in rows:
        if row["status"] == "runs":
            print(
                f"  {row['backend']:<28} runs: {row['era']} era, block size "
                f"{row['block_size']}, {row['steps_run']} steps, reorder {row['reorder']}"
            )
        else:
            print(f"  {row['backend']:<28} stops: {row['stage']}: {row['cause']}")
    return EXIT_OK if any(r["status"] == "runs" for r in rows) else EXIT_USAGE


def scaling_command(args: argparse.Namespace) -> int:
    """``harness memory scaling --vllm-src PATH``."""
    from harness.adapter.scaling import NOT_COVERED, tree_scaling
    from harness.vllm_tree.tree import locate_tree

    tree = locate_tree(args.vllm_src)
    options = platform_options(args)
    if args.list_backends:
        return list_backends(tree, options, args.backend, args.seed)
    steps = _steps(args.max_steps, "--max-steps", SCALING_STEPS)
    results = [
        tree_scaling(tree, name, options, steps, args.seed)
        for name in _backends(tree, args.backend)
    ]
    if args.json:
        print(
            json.dumps(
                {"tree": str(tree.root), "backends": [r.to_dict() for r in results]}, indent=2
            )
        )
    else:
        print(f"scaling on {tree.label}, {options.describe()}")
        for result in results:
            print(result.format())
        print(NOT_COVERED)
    if any(not r.ok for r in results):
        return EXIT_FOUND
    complete = [r for r in results if r.complete]
    if not complete or (args.backend is not None and len(complete) < len(results)):
        print(
            "harness: error: "
            + ("no backend" if not complete else "not every named backend")
            + " was driven through the whole sequence: its allocations were not all compared",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return EXIT_OK


def diff_command(args: argparse.Namespace) -> int:
    """``harness diff``."""
    from harness.adapter.diff import diff_trees
    from harness.vllm_tree.tree import locate_tree

    base = locate_tree(args.base, "--base")
    head = locate_tree(args.head, "--head")
    options = platform_options(args)
    if args.list_backends:
        code = list_backends(base, options, args.backend, args.seed)
        return max(code, list_backends(head, options, args.backend, args.seed))
    steps = _steps(args.steps, "--steps", DIFF_STEPS)
    results = diff_trees(base, head, args.backend, options, steps, args.seed)
    if args.json:
        print(
            json.dumps(
                {
                    "base": str(base.root),
                    "head": str(head.root),
                    "backends": [
                        {
                            "backend": r.backend,
                            "steps": r.steps,
                            "not_run": r.not_run,
                            "error": r.error,
                            "difference": None
                            if r.difference is None
                            else {
                                "step": r.difference.step,
                                "field": r.difference.field,
                                "base": r.difference.base,
                                "head": r.difference.head,
                            },
                        }
                        for r in results
                    ],
                },
                indent=2,
            )
        )
    else:
        print(f"diff {base.label} -> {head.label}, {options.describe()}")
        for result in results:
            print(result.format())
    if any(r.difference is not None or r.error is not None for r in results):
        return EXIT_FOUND
    compared = [r for r in results if r.not_run is None]
    if not compared or (args.backend is not None and len(compared) < len(results)):
        print(
            "harness: error: "
            + ("no backend" if not compared else "not every named backend")
            + " could be compared on both trees",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return EXIT_OK
