"""Benchmark: ``harness eval gsm8k`` against in-run baselines (prints; never asserts).

    .venv/bin/python scripts/bench_eval.py [--limit 20] [--skip-8b]

1. Tiny model on the CPU, ``--limit`` problems, 5-shot, memory tracked (what ``harness eval
   gsm8k --limit 20`` runs; target: at most 10 s of evaluation wall time on 2 cores). Baseline:
   the same lm-eval task with lm-eval's ``dummy`` model, i.e. lm-eval's own share of the time.
2. Llama-3.1-8B's shape on ``meta:h100-95``, the full 1,319-problem test split (target: at most
   30 s). Baseline: ``harness memory simulate`` of the synthetic gsm8k workload (1,319 requests of
   drawn lengths, no lm-eval), i.e. what driving the real prompts through lm-eval adds.
3. The same 8B run with ``--regression flashinfer-oom``: time to the out-of-memory error.

Wall times are for the evaluation (``simple_evaluate``; imports, data generation and the CPU
model's construction excluded); CPU is the process time over the same span.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import lm_eval

from harness.eval.data import load_gsm8k
from harness.eval.gsm8k import EvalOptions, evaluate_gsm8k
from harness.eval.lm import register
from harness.eval.task import gsm8k_task_config, gsm8k_task_manager
from harness.memory.sizes import format_size
from harness.simulation.simulate import simulate
from harness.simulation.workload import gsm8k

evaluator: Any = lm_eval


def timed(label: str, run: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"  {label}: wall {wall:.1f} s, cpu {cpu:.1f} s")
    return result, wall, cpu


def dummy_baseline(limit: int) -> Any:
    manager = gsm8k_task_manager()
    return evaluator.simple_evaluate(
        model="dummy",
        tasks=[gsm8k_task_config(manager, load_gsm8k())],
        task_manager=manager,
        num_fewshot=5,
        limit=limit,
        log_samples=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--skip-8b", action="store_true")
    args = parser.parse_args()
    register()
    load_gsm8k().tokenizer  # noqa: B018  # data and tokenizer once, outside every timing

    print(f"1. tiny on cpu, {args.limit} problems, 5-shot")
    _, base_wall, _ = timed("baseline: lm-eval dummy model", lambda: dummy_baseline(args.limit))
    report, _, _ = timed(
        "harness-ref", lambda: evaluate_gsm8k(EvalOptions(limit=args.limit, quiet=True))
    )
    engine = report.engine
    print(
        f"  harness-ref: evaluation wall {report.evaluation_time_s:.1f} s (target <= 10 s), "
        f"{engine['steps']} steps, {engine['tokens_per_s']:.0f} tokens/s, "
        f"peak {format_size(report.memory.peak_bytes)}; "
        f"{report.evaluation_time_s / base_wall:.1f}x the dummy model's"
    )
    if args.skip_8b:
        return

    print("2. llama-3.1-8b on meta:h100-95, the full test split (1,319 problems)")
    base, base_wall, _ = timed(
        "baseline: harness memory simulate --workload gsm8k",
        lambda: simulate(model="llama-3.1-8b", device="h100-95", workload=gsm8k()),
    )
    print(f"    {len(base.steps)} steps, peak {format_size(base.peak_bytes)}")
    full, _, _ = timed(
        "harness-ref", lambda: evaluate_gsm8k(EvalOptions(model="llama-3.1-8b", quiet=True))
    )
    engine = full.engine
    print(
        f"  harness-ref: evaluation wall {full.evaluation_time_s:.1f} s (target <= 30 s), "
        f"{engine['steps']} steps, {engine['num_requests']} requests, "
        f"{engine['num_preemptions']} preemptions, peak {format_size(full.memory.peak_bytes)}, "
        f"exit {full.exit_code}; {full.evaluation_time_s / base_wall:.2f}x the simulate baseline"
    )

    print("3. the same with --regression flashinfer-oom")
    oom_options = EvalOptions(model="llama-3.1-8b", regression="flashinfer-oom", quiet=True)
    oom, _, _ = timed("harness-ref", lambda: evaluate_gsm8k(oom_options))
    message = "" if oom.memory.oom is None else oom.memory.oom["message"].split(". GPU")[0]
    print(f"  out of memory after {oom.evaluation_time_s:.1f} s: {message!r}, exit {oom.exit_code}")


if __name__ == "__main__":
    main()
