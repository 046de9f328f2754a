"""``harness lm-eval``: lm-eval's own command line, with ``harness-ref`` registered, offline.

Every argument goes unchanged to the installed lm-eval's parser and run (``lm_eval._cli``'s
``HarnessCLI``, what lm-eval 0.4.13's ``lm-eval`` script runs; ``run`` is implied, as there), so
the seed's command runs with only the model swapped: ``harness lm-eval --model harness-ref
--model_args pretrained=meta-llama/Llama-3.1-8B-Instruct,device=meta:h100-95 --tasks gsm8k
--num_fewshot 5 --batch_size auto``. Around lm-eval's run: ``harness-ref`` is registered with
lm-eval's model registry; the Hub is offline; every task that reads gsm8k reads local splits
(generated, or the real ones from ``data=DIR`` in ``--model_args`` or ``--metadata``).
``harness-ref``'s ``model_args`` (:mod:`harness.eval.model_args`), ``--limit``, ``--batch_size``
and ``--output_path`` (writable) are checked before any work.

Exit 0: lm-eval's results table; 1: the simulated device ran out of memory (one line naming the
allocation); 2: usage (one line).
"""

from __future__ import annotations

import argparse
import inspect
import math
import re
import sys
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.eval.model_args import ModelChoice

COMMAND = "lm-eval"
MODEL = "harness-ref"
"""``harness.eval.lm.MODEL_NAME`` (that module imports torch)."""
EXIT_OOM = 1
NO_PREFIX = "\0"
"""The subcommand's own parser sees no option (every flag is lm-eval's)."""
META_NOTE = (
    "meta tensors hold no values: output lengths come from the seeded length model and the "
    "texts are empty, so the scores say nothing about the model (memory: harness eval gsm8k)"
)
OFFLINE_HINT = (
    "the Hugging Face Hub is offline here: gsm8k's tasks read local splits, others need their "
    "dataset in the Hugging Face cache"
)
POSITIVE_INTEGERS = frozenset(
    {"max_gen_toks", "max_length", "max_num_seqs", "max_num_batched_tokens", "num_gpu_blocks"}
)
BATCH_SIZE = re.compile(r"auto(:\d+)?|[1-9]\d*")


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],  # pyright: ignore[reportPrivateUsage]
) -> None:
    """Add ``harness lm-eval``; ``harness lm-eval --help`` prints lm-eval's own help."""
    parser = subparsers.add_parser(
        COMMAND,
        help="lm-eval's own command line with --model harness-ref (offline gsm8k)",
        description=__doc__,
        add_help=False,
        prefix_chars=NO_PREFIX,
    )
    parser.add_argument("lm_eval_args", nargs="*", help="lm-eval's arguments, unchanged")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    return run(list(args.lm_eval_args))


def run(argv: Sequence[str]) -> int:
    """Parse ``argv`` with lm-eval's parser and run it (module docstring); the exit status."""
    from harness.eval.gsm8k import require_lm_eval

    require_lm_eval()
    try:
        from lm_eval._cli import HarnessCLI
    except ImportError:
        raise HarnessError(
            f"harness lm-eval needs lm-eval's lm_eval._cli command line (as in lm-eval 0.4.13); "
            f"this is lm-eval {_lm_eval_version()}"
        ) from None
    import lm_eval.utils

    from harness.eval.lm import register as register_model
    from harness.eval.simulated import EngineOutOfMemoryError
    from harness.eval.task import cached_templates

    lm_utils: Any = lm_eval.utils  # lm-eval ships no type information
    lm_utils.setup_logging()
    cli: Any = HarnessCLI()
    args = _parse(cli, argv)
    if getattr(args, "command", None) == "run":
        check_run_args(args)
    register_model()
    try:
        with command_line_hooks(), cached_templates():
            cli.execute(args)
    except EngineOutOfMemoryError as exc:
        print(f"harness lm-eval: {describe_oom(exc)}", file=sys.stderr)
        return EXIT_OOM
    if getattr(args, "model", None) == MODEL and str(args.device).startswith("meta:"):
        print(f"harness lm-eval: {META_NOTE}", file=sys.stderr)
    return 0


def _parse(cli: Any, argv: Sequence[str]) -> argparse.Namespace:
    """lm-eval's ``HarnessCLI.parse_args`` reads ``sys.argv`` (and inserts ``run`` there)."""
    saved = sys.argv
    sys.argv = [COMMAND, *argv]
    try:
        parsed: argparse.Namespace = cli.parse_args()
    finally:
        sys.argv = saved
    return parsed


def check_run_args(args: argparse.Namespace) -> None:
    """Refuse, before any work, what lm-eval would only trip over later (with a traceback)."""
    limit: float | None = getattr(args, "limit", None)
    if limit is not None and not (math.isfinite(limit) and 0 < limit <= sys.maxsize):
        raise HarnessError(
            f"--limit must be a fraction in (0, 1) or a count of at most {sys.maxsize}, "
            f"got {limit:g}"
        )
    output_path: str | None = getattr(args, "output_path", None)
    if output_path is not None:
        check_output_path(output_path)
    if getattr(args, "model", None) != MODEL:
        return
    batch_size: str = getattr(args, "batch_size", "1")
    if not BATCH_SIZE.fullmatch(str(batch_size)):
        raise HarnessError(
            f"--batch_size must be auto, auto:N or a positive integer, got {batch_size!r}"
        )
    model_args: dict[str, Any] = dict(getattr(args, "model_args", None) or {})
    choice = check_model_args(
        model_args, getattr(args, "device", None), getattr(args, "num_fewshot", None)
    )
    # lm-eval hands the model its --device (default cuda:0) besides --model_args: one device.
    model_args.pop("device", None)
    args.model_args, args.device = model_args, choice.device


def check_output_path(output_path: str) -> None:
    """``--output_path`` names a place lm-eval can write: a ``.json`` file in a directory that
    can be made and written, or such a directory (lm-eval writes a folder per model into it).
    lm-eval itself only logs a failed save at INFO level, and exits 0 having written nothing."""
    from harness.paths import writable_directory

    path = Path(output_path)
    if output_path.strip() and path.suffix == ".json":
        if path.is_dir():
            raise HarnessError(f"--output_path {output_path}: it is a directory")
        writable_directory(str(path.parent), "--output_path's directory")
    else:
        writable_directory(output_path, "--output_path")


def check_model_args(
    model_args: dict[str, Any], cli_device: str | None, num_fewshot: int | None = None
) -> ModelChoice:
    """``harness-ref``'s ``--model_args``: known keys, a known model, device and backend, and
    readable data with ``num_fewshot`` examples to draw
    (:func:`harness.eval.model_args.resolve_model_choice`)."""
    from harness.eval.data import load_gsm8k
    from harness.eval.lm import HarnessRefLM
    from harness.eval.model_args import resolve_model_choice

    accepted = set(inspect.signature(HarnessRefLM.__init__).parameters) - {"self", "backend"}
    unknown = sorted(set(model_args) - accepted)
    if unknown:
        raise HarnessError(
            f"--model_args: harness-ref takes no {', '.join(map(repr, unknown))}; "
            f"it takes {', '.join(sorted(accepted))}"
        )
    if cli_device is not None and "device" in model_args:
        raise HarnessError("device is given twice: --device and --model_args device=")
    device = model_args.get("device", cli_device)

    def text(key: str) -> str | None:
        value = model_args.get(key)
        return None if value is None else str(value)

    for key in POSITIVE_INTEGERS & set(model_args):
        value = model_args[key]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise HarnessError(f"--model_args {key}= must be a positive integer, got {value!r}")
    utilization = model_args.get("gpu_memory_utilization", 0.9)
    if not isinstance(utilization, int | float) or not 0 < utilization <= 1:
        raise HarnessError(
            f"--model_args gpu_memory_utilization= must be in (0, 1], got {utilization!r}"
        )
    pretrained = text("pretrained")
    choice = resolve_model_choice(
        pretrained="tiny" if pretrained is None else pretrained,
        device=None if device is None else str(device),
        attention_backend=text("attention_backend"),
        regression=text("regression"),
    )
    data = load_gsm8k(text("data"), _seed(model_args.get("seed", 0)))
    if num_fewshot is not None and not 0 <= num_fewshot <= len(data.train):
        raise HarnessError(
            f"--num_fewshot {num_fewshot}: gsm8k's train split has {len(data.train)} examples"
        )
    return choice


def _seed(value: object) -> int:
    from harness.eval.model_args import check_seed

    return check_seed(value, "--model_args seed=")


@contextmanager
def command_line_hooks() -> Generator[None, None, None]:
    """Within the block, lm-eval's command line points every gsm8k task at local splits, and its
    ``ValueError`` for bad input (or a dataset missing offline) becomes a one-line HarnessError.
    """
    from lm_eval.config.evaluate_config import EvaluatorConfig

    from harness.eval.data import load_gsm8k
    from harness.eval.task import use_local_splits

    config_class: Any = EvaluatorConfig  # lm-eval ships no type information
    original = config_class.process_tasks
    original_from_cli = config_class.__dict__["from_cli"]

    def from_cli(cls: Any, namespace: argparse.Namespace) -> Any:
        try:
            return original_from_cli.__func__(cls, namespace)
        except (ValueError, TypeError, FileNotFoundError) as exc:
            raise HarnessError(str(exc)) from None

    def process_tasks(self: Any, metadata: dict[str, Any] | None = None) -> Any:
        try:
            manager = original(self, metadata)
        except ValueError as exc:  # "Tasks not found: ..." and the like
            raise HarnessError(str(exc)) from None
        meta: dict[str, Any] = self.metadata or {}
        data = meta.get("data")
        use_local_splits(
            manager, load_gsm8k(None if data is None else str(data), _seed(meta.get("seed", 0)))
        )
        load = manager.load

        def load_offline(*args: Any, **kwargs: Any) -> Any:
            try:
                return load(*args, **kwargs)
            except (ConnectionError, FileNotFoundError) as exc:  # what `datasets` raises offline
                raise HarnessError(f"{exc} ({OFFLINE_HINT})") from None

        manager.load = load_offline
        return manager

    config_class.process_tasks = process_tasks
    config_class.from_cli = classmethod(from_cli)
    try:
        yield
    finally:
        config_class.process_tasks = original
        config_class.from_cli = original_from_cli


def describe_oom(exc: Any) -> str:
    """One line: torch's message, then where the simulated device ran out."""
    oom: Any = exc.result.oom
    step = exc.result.oom_step
    where = "while sizing the KV cache" if step is None else f"at engine step {step}"
    source = "" if oom.source is None else f" at {oom.source}"
    message = " ".join(str(oom.torch_message).split())
    return f"out of memory {where}: {message} ({oom.op}{source}, simulated on {oom.device})"


def _lm_eval_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lm-eval")
    except PackageNotFoundError:
        return "(unknown version)"
