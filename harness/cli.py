"""The ``harness`` command. Subcommands only parse arguments and call library code."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from harness import __version__
from harness.errors import HarnessError
from harness.extras import missing_extra

if TYPE_CHECKING:
    from harness.reference.backends.abstract import AttentionBackend

EXIT_USAGE = 2


class _Register(Protocol):
    def __call__(
        self,
        subparsers: argparse._SubParsersAction[argparse.ArgumentParser],  # pyright: ignore[reportPrivateUsage]
    ) -> None: ...


def _registrars() -> list[_Register]:
    """Each area registers its own subcommands; listed explicitly, no import side effects.

    Registration imports no torch (areas import it when a command runs), so ``harness overrides``
    in pre-commit starts in a fraction of a second.
    """
    from harness import demo
    from harness.eval import cli as eval_cli
    from harness.memory import cli as memory_cli
    from harness.overrides import cli as overrides_cli

    return [
        demo.register,
        overrides_cli.register,
        functools.partial(memory_cli.register, resolve_regression=_resolve_regression),
        _register_regressions,
        functools.partial(eval_cli.register, resolve_regression=_resolve_regression),
    ]


def _resolve_regression(spec: str) -> tuple[str, type[AttentionBackend]]:
    """``--regression`` of ``harness memory`` and ``harness eval``: a catalog name -> (name,
    backend class).

    The seam between the memory tools and the catalog that sits above them: ``harness.memory``
    never imports ``harness.regressions``; it is handed this function. Unknown names raise a
    :class:`HarnessError` that lists the known ones.
    """
    from harness.regressions import get_regression

    regression = get_regression(spec)
    return regression.name, regression.backend


def _register_regressions(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],  # pyright: ignore[reportPrivateUsage]
) -> None:
    """``harness regressions [NAME]``: list the catalog, or print one entry's story."""
    parser = subparsers.add_parser("regressions", help="list the named regressions, or explain one")
    parser.add_argument("name", nargs="?", default=None, help="print this one's full story")
    parser.set_defaults(func=_regressions)


def _regressions(args: argparse.Namespace) -> int:
    from harness.regressions import REGRESSIONS, get_regression

    if args.name is not None:
        print(get_regression(args.name).doc.strip())
        return 0
    for name in sorted(REGRESSIONS):
        print(f"{name}: {REGRESSIONS[name].summary}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harness",
        description="Regression hunting for the attention layer of vLLM-V1-style engines.",
    )
    parser.add_argument("--version", action="version", version=f"harness {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in _registrars():
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if run is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return run(args)
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
