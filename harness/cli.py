"""The ``harness`` command. Subcommands only parse arguments and call library code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Protocol

from harness import __version__
from harness.errors import ChildError, HarnessError
from harness.extras import missing_extra

EXIT_USER_CODE = 1
"""User code that a command ran in a child process ended it (:class:`harness.errors.ChildError`)."""
EXIT_USAGE = 2


class _Register(Protocol):
    def __call__(
        self,
        subparsers: argparse._SubParsersAction[argparse.ArgumentParser],  # pyright: ignore[reportPrivateUsage]
    ) -> None: ...


def _registrars() -> list[_Register]:
    """Each area registers its own subcommands; listed explicitly, no import side effects.

    Registration imports no torch (areas import it when a command runs).
    """
    from harness import demo
    from harness.adapter import cli as adapter_cli
    from harness.bisect import cli as bisect_cli
    from harness.eval import cli as eval_cli
    from harness.eval import lm_eval_cli
    from harness.fidelity import cli as fidelity_cli
    from harness.hunt import cli as hunt_cli
    from harness.overrides import cli as overrides_cli
    from harness.regressions import cli as regressions_cli
    from harness.simulation import cli as memory_cli

    return [
        demo.register,
        overrides_cli.register,
        memory_cli.register,
        eval_cli.register,
        lm_eval_cli.register,
        regressions_cli.register,
        bisect_cli.register,
        hunt_cli.register,
        fidelity_cli.register,
        adapter_cli.register,
    ]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser. With ``command="overrides"`` (the pre-commit hook's path), one that
    knows that subcommand alone, so that only the checker is imported."""
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Regression hunting for the attention layer of vLLM-V1-style engines.",
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    if command == "overrides":
        from harness.overrides import cli as overrides_cli

        registrars: list[_Register] = [overrides_cli.register]
    else:
        registrars = _registrars()
    for register in registrars:
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser("overrides" if argv[:1] == ["overrides"] else None)
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if run is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return run(args)
    except ChildError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return EXIT_USER_CODE
    except HarnessError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:  # an optional extra is not installed: say which one
        hint = missing_extra(exc)
        if hint is None:
            raise
        print(f"harness: error: {hint}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
