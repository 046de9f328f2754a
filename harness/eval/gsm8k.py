"""Run gsm8k through lm-eval's ``simple_evaluate`` into the reference engine, offline.

:func:`evaluate_gsm8k` registers ``harness-ref`` with lm-eval, builds lm-eval's gsm8k task over
local splits (:mod:`harness.eval.task`), creates the model through lm-eval's registry and hands
both to ``lm_eval.simple_evaluate`` (few-shot prompts, ``generate_until``, the answer filters and
``exact_match`` are all lm-eval's). An out-of-memory error of the simulated device ends the
evaluation, as it ends a real vLLM run; the report then has no results but names the allocation.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.reference.backends.abstract import AttentionBackend

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
"""Set before lm-eval and ``datasets`` are imported: nothing may be downloaded."""
EVAL_EXTRA_HINT = (
    "harness eval needs lm-eval, which the 'eval' extra installs: "
    "pip install 'attn-metadata-harness[eval]' (or `make install` in a checkout)"
)


@dataclass(frozen=True)
class EvalOptions:
    """One gsm8k run (the ``harness eval gsm8k`` flags)."""

    model: str = "tiny"
    device: str | None = None
    """``cpu`` or ``meta:PROFILE``; default ``cpu`` for tiny models, ``meta:h100-95`` for 8B
    (:func:`harness.eval.model_args.resolve_device`)."""
    regression: str | None = None
    """The name shown for the backend variant; without ``backend``, resolved by name or
    ``MODULE:ATTR`` (:func:`harness.regressions.resolve.resolve_labelled_backend`)."""
    backend: type[AttentionBackend] | None = None
    """The attention backend class (default: the reference FlashInfer backend)."""
    limit: int | None = None
    num_fewshot: int = 5
    batch_size: int | str = "auto"
    memory_budget: int | None = None
    data: str | None = None
    seed: int = 0
    quiet: bool = False
    max_gen_toks: int | None = None
    """lm-eval's ``max_gen_toks`` (default 256); the task's own setting, if any, wins."""

    @property
    def resolved_device(self) -> str:
        from harness.eval.model_args import resolve_device, resolve_preset

        return resolve_device(self.device, resolve_preset(self.model))

    def model_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {
            "pretrained": self.model,
            "device": self.resolved_device,
            "regression": self.regression,
            "backend": self.backend,
            "data": self.data,
            "seed": self.seed,
            "quiet": self.quiet,
        }
        if self.max_gen_toks is not None:
            args["max_gen_toks"] = self.max_gen_toks
        return args


def require_lm_eval() -> None:
    """Raise a :class:`HarnessError` saying how to install lm-eval when it is missing; else keep
    lm-eval and ``datasets`` offline (:data:`OFFLINE_ENV`)."""
    import importlib.util

    if importlib.util.find_spec("lm_eval") is None:
        raise HarnessError(EVAL_EXTRA_HINT)
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


def evaluate_gsm8k(options: EvalOptions) -> Any:
    """Run the evaluation; returns a :class:`~harness.eval.report.EvalReport`."""
    require_lm_eval()
    import lm_eval
    import lm_eval.api.registry

    from harness.eval.data import load_gsm8k
    from harness.eval.lm import MODEL_NAME, HarnessRefLM, register
    from harness.eval.model_args import check_seed
    from harness.eval.report import EvalReport
    from harness.eval.simulated import EngineOutOfMemoryError
    from harness.eval.task import cached_templates, gsm8k_task_config, gsm8k_task_manager

    if options.limit is not None and options.limit <= 0:
        raise HarnessError(f"--limit must be positive, got {options.limit}")
    if options.limit is not None and options.limit > sys.maxsize:
        raise HarnessError(f"--limit must be at most {sys.maxsize}, got {options.limit}")
    if options.num_fewshot < 0:
        raise HarnessError(f"--num-fewshot must not be negative, got {options.num_fewshot}")
    check_seed(options.seed, "--seed")
    register()
    data = load_gsm8k(options.data, options.seed)
    if options.num_fewshot > len(data.train):
        raise HarnessError(
            f"--num-fewshot {options.num_fewshot}: the train split has {len(data.train)} examples"
        )
    manager = gsm8k_task_manager()
    task = gsm8k_task_config(manager, data)
    registry: Any = lm_eval.api.registry  # lm-eval ships no type information
    evaluator: Any = lm_eval
    lm: HarnessRefLM = registry.get_model(MODEL_NAME).create_from_arg_obj(
        options.model_args(), {"batch_size": options.batch_size}
    )
    notes: list[str] = []
    started = time.perf_counter()
    try:
        with cached_templates():
            results: dict[str, Any] | None = evaluator.simple_evaluate(
                model=lm,
                tasks=[task],
                task_manager=manager,
                num_fewshot=options.num_fewshot,
                limit=options.limit,
                batch_size=options.batch_size,
                log_samples=False,
            )
    except EngineOutOfMemoryError as exc:
        results = None
        notes.append(f"lm-eval did not finish: out of memory at step {exc.result.oom_step}")
    elapsed = time.perf_counter() - started
    if options.resolved_device.startswith("meta:"):
        notes.append(
            "meta tensors hold no values: output lengths come from the seeded length model and "
            "the texts are empty, so the scores say nothing about the model"
        )
    return EvalReport(
        config={
            "task": "gsm8k",
            "model": options.model,
            "device": options.resolved_device,
            "regression": options.regression,
            "data": data.source,
            **{k: getattr(options, k) for k in ("limit", "num_fewshot", "batch_size", "seed")},
        },
        results=results,
        engine=lm.engine.stats.to_dict(),
        memory=lm.engine.memory_report(),
        budget_bytes=options.memory_budget,
        evaluation_time_s=elapsed,
        notes=notes,
    )
