"""``harness memory``: simulate vLLM's memory on a named GPU, and find allocations that scale.

Subcommands (thin: parse, call the library, print):

- ``simulate``: size the KV cache as vLLM does and run a workload on a simulated device
  (:func:`harness.simulation.simulate.simulate`); exit 0 when every step fits, 1 on an out-of-memory
  error, 2 on usage errors. ``--json`` prints one JSON object, ``--plot FILE.png`` draws the run.
- ``scaling``: report allocations whose size changes with ``num_blocks``
  (:func:`harness.simulation.scaling.detect_scaling`); exit 1 when anything but the KV cache scales.
- ``devices``: the simulated device profiles.

``--regression NAME|MODULE:ATTR`` runs a backend variant instead of the reference backend, found
by the one resolver (:func:`harness.regressions.resolve.resolve_labelled_backend`); user code
(``MODULE:ATTR``) runs in a child process, where however it ends is an error, exit 1.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError
from harness.memory.devices import DEVICE_PROFILES
from harness.memory.sizes import format_size, parse_size

if TYPE_CHECKING:
    from harness.reference.backends.abstract import AttentionBackend
    from harness.simulation.workload import Workload

EXIT_OK = 0
EXIT_FOUND = 1
"""``simulate``: an allocation did not fit; ``scaling``: something besides the KV cache scales."""


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],  # pyright: ignore[reportPrivateUsage]
) -> None:
    """Add ``harness memory`` and its subcommands."""
    memory = subparsers.add_parser(
        "memory",
        help="simulate vLLM's GPU memory on a CPU; find allocations that scale with num_blocks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    memory.set_defaults(func=help_command(memory))
    sub = memory.add_subparsers(dest="memory_command", metavar="SUBCOMMAND")

    sim = sub.add_parser(
        "simulate",
        help="size the KV cache as vLLM does and run a workload on a simulated GPU",
        description="Exit 0: every step fits; 1: out of memory (op and source line named); 2: usage.",
    )
    _add_run_arguments(sim, model="llama-3.1-8b", workload="gsm8k")
    sim.add_argument("--device", default="h100-95", help="device profile (default: %(default)s)")
    sim.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=0.9,
        help="vLLM's gpu_memory_utilization (default: %(default)s)",
    )
    sim.add_argument(
        "--non-torch",
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
    _add_run_arguments(scaling, model="tiny", workload="tiny")
    scaling.add_argument(
        "--num-blocks",
        type=int,
        nargs=2,
        default=[64, 128],
        metavar=("A", "B"),
        help="the two KV cache sizes to compare (default: 64 128)",
    )
    scaling.add_argument(
        "--device",
        choices=("meta", "cpu"),
        default="meta",
        help="run on (default: %(default)s: every device allocation is seen, host-built tensors "
        "moved to the device included; cpu runs real data)",
    )
    scaling.add_argument(
        "--dtype",
        choices=("bfloat16", "float16", "float32"),
        default="bfloat16",
        help="dtype of the weights and the KV cache (default: %(default)s, what deployments run; "
        "at float32 a cast of the cache to float32 copies nothing)",
    )
    scaling.add_argument("--max-steps", type=int, default=None, help="compare the first N steps")
    scaling.add_argument("--json", action="store_true", help="print one JSON object")
    from harness.adapter.cli import add_scaling_arguments

    add_scaling_arguments(scaling)  # --vllm-src: the engine adapter (harness.adapter)
    scaling.set_defaults(func=_scaling)

    devices = sub.add_parser("devices", help="list the simulated device profiles")
    devices.set_defaults(func=_devices)


def _add_run_arguments(parser: argparse.ArgumentParser, *, model: str, workload: str) -> None:
    parser.add_argument("--model", default=model, help="model preset (default: %(default)s)")
    parser.add_argument("--workload", default=workload, help="workload (default: %(default)s)")
    parser.add_argument(
        "--regression", default=None, metavar="NAME", help="run a regression variant's backend"
    )


def help_command(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """The command of a subcommand group run without a subcommand: ``parser``'s help, exit 2."""

    def run(args: argparse.Namespace) -> int:
        del args
        parser.print_help()
        return 2

    return run


def _positive(value: int | None, flag: str) -> None:
    if value is not None and value <= 0:
        raise HarnessError(f"{flag} must be positive, got {value}")


def run_command(args: argparse.Namespace, function: str) -> int:
    """Print the text of ``function(options) -> (exit code, text)`` and return its exit code.

    ``options`` are ``args`` as a dict. Where ``--regression`` names user code (``MODULE:ATTR``)
    it runs in a child process (:func:`harness.child.run_in_child`): however that code ends, it
    is this command's error, exit 1 (``main`` prints the :class:`~harness.child.ChildError`).
    """
    from harness.child import call
    from harness.errors import ChildError
    from harness.regressions.resolve import is_import_spec

    options = {k: v for k, v in vars(args).items() if k != "func"}
    spec: str | None = args.regression
    try:
        code, text = call(function, options, in_child=spec is not None and is_import_spec(spec))
    except ChildError as exc:
        raise ChildError(f"--regression {spec!r}: {exc.how}", exc.step, exc.last_lines) from None
    print(text)
    return int(code)


def _run_inputs(
    args: argparse.Namespace,
) -> tuple[Workload, str | None, type[AttentionBackend] | None]:
    """The workload and the (label, backend) of ``--regression`` (``None, None``: the reference)."""
    from harness.simulation.workload import get_workload

    workload = get_workload(args.workload)
    if args.regression is None:
        return workload, None, None
    from harness.regressions.resolve import resolve_labelled_backend

    return workload, *resolve_labelled_backend(args.regression)


def _simulate(args: argparse.Namespace) -> int:
    _positive(args.top, "--top")
    _positive(args.max_steps, "--max-steps")
    if args.plot is not None:
        from harness.simulation.plot import check_plot_path

        check_plot_path(args.plot)
    if args.non_torch is not None:
        parse_size(args.non_torch)
    return run_command(args, "harness.simulation.cli:simulate_report")


def simulate_report(options: dict[str, Any]) -> tuple[int, str]:
    """``harness memory simulate``'s exit code and text (see :func:`run_command`)."""
    args = argparse.Namespace(**options)
    non_torch = None if args.non_torch is None else parse_size(args.non_torch)
    workload, name, backend = _run_inputs(args)
    from harness.simulation.simulate import simulate

    result = simulate(
        model=args.model,
        device=args.device,
        workload=workload,
        backend=backend,
        regression=name,
        gpu_memory_utilization=args.gpu_memory_utilization,
        non_torch_bytes=non_torch,
        memoize=not args.no_memoize,
        max_steps=args.max_steps,
        top_k=args.top,
    )
    if args.plot is not None:
        from harness.simulation.plot import plot_simulation

        plot_simulation(result, args.plot)
    if args.json:
        text = json.dumps(result.to_dict(), indent=2)
    else:
        text = result.format()
        if args.plot is not None:
            text += f"\nplot written to {args.plot}"
    return (EXIT_OK if result.completed else EXIT_FOUND), text


def _scaling(args: argparse.Namespace) -> int:
    if args.vllm_src is not None:
        from harness.adapter.cli import scaling_command

        return scaling_command(args)
    if args.backend or args.list_backends:
        raise HarnessError("--backend and --list-backends need --vllm-src PATH")
    _positive(args.max_steps, "--max-steps")
    return run_command(args, "harness.simulation.cli:scaling_report")


def scaling_report(options: dict[str, Any]) -> tuple[int, str]:
    """``harness memory scaling``'s exit code and text (see :func:`run_command`)."""
    args = argparse.Namespace(**options)
    workload, name, backend = _run_inputs(args)
    import torch

    from harness.simulation.scaling import detect_scaling

    report = detect_scaling(
        model=args.model,
        workload=workload,
        backend=backend,
        regression=name,
        num_blocks=(args.num_blocks[0], args.num_blocks[1]),
        device=args.device,
        dtype=getattr(torch, args.dtype),
        max_steps=args.max_steps,
    )
    text = json.dumps(report.to_dict(), indent=2) if args.json else report.format()
    return (EXIT_OK if report.ok else EXIT_FOUND), text


def _devices(args: argparse.Namespace) -> int:
    del args
    for name, profile in sorted(DEVICE_PROFILES.items()):
        print(f"{name:10} {format_size(profile.total_memory):>12}  {profile.source}")
    return EXIT_OK
