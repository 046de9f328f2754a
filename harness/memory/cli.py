"""``harness memory``: simulate vLLM's memory on a named GPU, and find allocations that scale.

Subcommands (thin: parse, call the library, print):

- ``simulate``: size the KV cache as vLLM does and run a workload on a simulated device
  (:func:`harness.memory.simulate.simulate`); exit 0 when every step fits, 1 on an out-of-memory
  error, 2 on usage errors. ``--json`` prints one JSON object, ``--plot FILE.png`` draws the run.
- ``scaling``: report allocations whose size changes with ``num_blocks``
  (:func:`harness.memory.scaling.detect_scaling`); exit 1 when anything but the KV cache scales.
- ``devices``: the simulated device profiles. ``regressions``: the named regressions.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from harness.errors import HarnessError
from harness.memory.devices import DEVICE_PROFILES
from harness.memory.sizes import format_size, parse_size
from harness.memory.workload import get_workload

EXIT_OK = 0
EXIT_FOUND = 1
"""``simulate``: an allocation did not fit; ``scaling``: something besides the KV cache scales."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add ``harness memory`` and its subcommands."""
    memory = subparsers.add_parser(
        "memory",
        help="simulate vLLM's GPU memory on a CPU; find allocations that scale with num_blocks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    memory.set_defaults(func=_usage(memory))
    sub = memory.add_subparsers(dest="memory_command", metavar="SUBCOMMAND")

    sim = sub.add_parser(
        "simulate",
        help="size the KV cache as vLLM does and run a workload on a simulated GPU",
        description="Exit 0: every step fits; 1: out of memory (op and source line named); 2: usage.",
    )
    sim.add_argument("--model", default="llama-3.1-8b", help="model preset (default: %(default)s)")
    sim.add_argument("--device", default="h100-95", help="device profile (default: %(default)s)")
    sim.add_argument("--workload", default="gsm8k", help="workload (default: %(default)s)")
    sim.add_argument("--regression", default=None, help="run a named regression variant")
    sim.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=0.9,
        help="vLLM's gpu_memory_utilization (default: %(default)s)",
    )
    sim.add_argument(
        "--non-torch",
        default=None,
        metavar="SIZE",
        help="device memory outside torch, e.g. '512 MiB' (default: the device profile's)",
    )
    sim.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    sim.add_argument(
        "--no-memoize", action="store_true", help="run every decoder layer (no replay; slow)"
    )
    sim.add_argument("--top", type=int, default=10, help="allocations to list (default: 10)")
    sim.add_argument("--json", action="store_true", help="print one JSON object")
    sim.add_argument("--plot", default=None, metavar="FILE.png", help="draw live bytes per step")
    sim.set_defaults(func=_simulate)

    scaling = sub.add_parser(
        "scaling",
        help="report allocations whose size changes with num_blocks (only the KV cache may)",
        description="Exit 0: only the KV cache scales; 1: something else does; 2: usage.",
    )
    scaling.add_argument("--model", default="tiny", help="model preset (default: %(default)s)")
    scaling.add_argument("--workload", default="tiny", help="workload (default: %(default)s)")
    scaling.add_argument("--regression", default=None, help="run a named regression variant")
    scaling.add_argument(
        "--num-blocks",
        type=int,
        nargs=2,
        default=[64, 128],
        metavar=("A", "B"),
        help="the two KV cache sizes to compare (default: 64 128)",
    )
    scaling.add_argument(
        "--device", choices=("cpu", "meta"), default="cpu", help="run on (default: %(default)s)"
    )
    scaling.add_argument("--max-steps", type=int, default=None, help="compare the first N steps")
    scaling.add_argument("--json", action="store_true", help="print one JSON object")
    scaling.set_defaults(func=_scaling)

    devices = sub.add_parser("devices", help="list the simulated device profiles")
    devices.set_defaults(func=_devices)

    regressions = sub.add_parser("regressions", help="list the named regressions, or explain one")
    regressions.add_argument("name", nargs="?", default=None, help="print this one's full story")
    regressions.set_defaults(func=_regressions)


def _usage(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        del args
        parser.print_help()
        return 2

    return run


def _positive(value: int | None, flag: str) -> None:
    if value is not None and value <= 0:
        raise HarnessError(f"{flag} must be positive, got {value}")


def _simulate(args: argparse.Namespace) -> int:
    from harness.memory.simulate import simulate

    _positive(args.max_steps, "--max-steps")
    _positive(args.top, "--top")
    non_torch = None if args.non_torch is None else parse_size(args.non_torch)
    if args.plot is not None:
        from harness.memory.plot import check_plot_path

        check_plot_path(args.plot)
    result = simulate(
        model=args.model,
        device=args.device,
        workload=get_workload(args.workload),
        regression=args.regression,
        gpu_memory_utilization=args.gpu_memory_utilization,
        non_torch_bytes=non_torch,
        memoize=not args.no_memoize,
        max_steps=args.max_steps,
        top_k=args.top,
    )
    if args.plot is not None:
        from harness.memory.plot import plot_simulation

        plot_simulation(result, args.plot)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.format())
        if args.plot is not None:
            print(f"plot written to {args.plot}")
    return EXIT_OK if result.completed else EXIT_FOUND


def _scaling(args: argparse.Namespace) -> int:
    from harness.memory.scaling import detect_scaling

    _positive(args.max_steps, "--max-steps")
    report = detect_scaling(
        model=args.model,
        workload=get_workload(args.workload),
        regression=args.regression,
        num_blocks=(args.num_blocks[0], args.num_blocks[1]),
        device=args.device,
        max_steps=args.max_steps,
    )
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format())
    return EXIT_OK if report.ok else EXIT_FOUND


def _devices(args: argparse.Namespace) -> int:
    del args
    for name in sorted(DEVICE_PROFILES):
        profile = DEVICE_PROFILES[name]
        print(f"{name:10} {format_size(profile.total_memory):>12}  {profile.source}")
    return EXIT_OK


def _regressions(args: argparse.Namespace) -> int:
    from harness.regressions import REGRESSIONS, get_regression

    if args.name is not None:
        print(get_regression(args.name).doc.strip())
        return EXIT_OK
    for name in sorted(REGRESSIONS):
        print(f"{name}: {REGRESSIONS[name].summary}")
    return EXIT_OK
