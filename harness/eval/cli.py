"""``harness eval gsm8k``: lm-eval's gsm8k through the reference engine, offline.

Runs ``lm_eval.simple_evaluate`` with the ``harness-ref`` model on gsm8k (generated problems, or
the real splits with ``--data DIR``): ``--model tiny --device cpu`` generates for real on the CPU;
``--model llama-3.1-8b --device meta:h100-95`` runs the 8B shape on a simulated GPU, where an
allocation that does not fit ends the run with torch's out-of-memory message, the op and the
source line. Prints lm-eval's results table, the engine's steps, preemptions and tokens/s, and
the memory report; ``--json`` prints one object instead (``results``, ``engine``, ``memory``).
``harness lm-eval`` runs the same model through lm-eval's own command line and prints only
lm-eval's table; this command is the gate (memory report, ``--memory-budget``, ``--json``).

Exit 0: a clean run; 1: out of memory, or the peak exceeded ``--memory-budget``, or user code
(``--regression MODULE:ATTR``, run in a child process) ended the run; 2: usage.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
from typing import Any

from harness.errors import HarnessError
from harness.memory.sizes import parse_size
from harness.simulation.cli import help_command, run_command


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],  # pyright: ignore[reportPrivateUsage]
) -> None:
    """Add ``harness eval`` and its ``gsm8k`` subcommand; ``--regression`` goes through
    :func:`harness.regressions.resolve.resolve_labelled_backend`."""
    evaluate = subparsers.add_parser(
        "eval",
        help="run an lm-eval task through the reference engine (CPU or simulated GPU)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    evaluate.set_defaults(func=help_command(evaluate))
    sub = evaluate.add_subparsers(dest="eval_task", metavar="TASK")
    gsm8k = sub.add_parser(
        "gsm8k",
        help="gsm8k, 5-shot, as `lm_eval --tasks gsm8k` runs it",
        description="Exit 0: clean; 1: out of memory or over --memory-budget; 2: usage.",
    )
    gsm8k.add_argument(
        "--limit", type=int, default=None, metavar="N", help="evaluate the first N problems"
    )
    gsm8k.add_argument(
        "--num-fewshot",
        type=int,
        default=5,
        metavar="N",
        help="few-shot examples (default: %(default)s)",
    )
    gsm8k.add_argument(
        "--batch-size",
        default="auto",
        metavar="auto|N",
        help="'auto' hands every request to the engine at once (default), or N per call",
    )
    gsm8k.add_argument(
        "--model",
        default="tiny",
        help="tiny (CPU) or llama-3.1-8b, alias meta-llama/Llama-3.1-8B-Instruct (meta) "
        "(default: %(default)s)",
    )
    gsm8k.add_argument(
        "--device",
        default=None,
        help="cpu or meta:PROFILE, e.g. meta:h100-95 (default: cpu for tiny, meta:h100-95 for 8B)",
    )
    gsm8k.add_argument(
        "--regression",
        default=None,
        metavar="NAME",
        help="run a regression variant's backend (as harness memory --regression)",
    )
    gsm8k.add_argument(
        "--memory-budget",
        default=None,
        metavar="SIZE",
        help="fail (exit 1) when the peak exceeds SIZE, e.g. '512 MiB'",
    )
    gsm8k.add_argument(
        "--data", default=None, metavar="DIR", help="a local copy of gsm8k's train/test splits"
    )
    gsm8k.add_argument(
        "--max-gen-toks",
        type=int,
        default=None,
        metavar="N",
        help="lm-eval's max_gen_toks: tokens generated at most per problem (default: 256)",
    )
    gsm8k.add_argument("--seed", type=int, default=0, help="data, tokenizer and length seed")
    gsm8k.add_argument("--json", action="store_true", help="print one JSON object")
    gsm8k.set_defaults(func=_gsm8k)


def _batch_size(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise HarnessError(
            f"--batch-size must be 'auto' or a positive integer, got {text!r}"
        ) from None
    if value <= 0:
        raise HarnessError(f"--batch-size must be positive, got {value}")
    return value


def _gsm8k(args: argparse.Namespace) -> int:
    from harness.eval.gsm8k import require_lm_eval

    require_lm_eval()
    if args.max_gen_toks is not None and args.max_gen_toks <= 0:
        raise HarnessError(f"--max-gen-toks must be positive, got {args.max_gen_toks}")
    _batch_size(args.batch_size)
    if args.memory_budget is not None:
        parse_size(args.memory_budget)
    return run_command(args, "harness.eval.cli:gsm8k_report")


def gsm8k_report(options: dict[str, Any]) -> tuple[int, str]:
    """``harness eval gsm8k``'s exit code and text (see
    :func:`harness.simulation.cli.run_command`)."""
    from harness.eval.gsm8k import EvalOptions, evaluate_gsm8k

    args = argparse.Namespace(**options)
    regression, backend = None, None
    if args.regression is not None:
        from harness.regressions.resolve import resolve_labelled_backend

        regression, backend = resolve_labelled_backend(args.regression)
    eval_options = EvalOptions(
        model=args.model,
        device=args.device,
        regression=regression,
        backend=backend,
        limit=args.limit,
        num_fewshot=args.num_fewshot,
        batch_size=_batch_size(args.batch_size),
        memory_budget=None if args.memory_budget is None else parse_size(args.memory_budget),
        data=args.data,
        seed=args.seed,
        quiet=args.json,
        max_gen_toks=args.max_gen_toks,
    )
    for name in ("lm_eval", "datasets"):
        logging.getLogger(name).setLevel(logging.ERROR)
    quiet = contextlib.redirect_stderr(io.StringIO()) if args.json else contextlib.nullcontext()
    with quiet:  # lm-eval's own progress bars write to stderr
        report = evaluate_gsm8k(eval_options)
    if args.json:
        import lm_eval.utils

        lm_utils: Any = lm_eval.utils  # lm-eval ships no type information
        text = json.dumps(report.to_dict(), indent=2, default=lm_utils.handle_non_serializable)
    else:
        text = report.format()
    exit_code: int = report.exit_code
    return exit_code, text
