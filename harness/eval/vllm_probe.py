"""On a GPU with vLLM: does any per-step allocation grow with the number of KV cache blocks?

vLLM runs twice, with two ``num_gpu_blocks_override`` values, each in its own process, in-process
engine (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) and eager mode, on gsm8k-format prompts. The check
fails when the step peak above start-up grows by more than :data:`MAX_GROWTH_SHARE` of the KV
cache's own growth and by more than :data:`NOISE_BYTES`.

``python -m harness.eval.vllm_probe compare --model M --num-blocks A B`` prints both measurements
and the verdict as JSON; exit 0 when nothing scales, 1 when something does, 2 on usage errors.
Needs CUDA and vLLM in its interpreter; vLLM is imported only inside ``measure``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Any

from harness.eval.problems import make_split

MAX_GROWTH_SHARE = 0.005
"""Step-peak growth allowed, as a share of the KV cache's growth between the two runs."""
NOISE_BYTES = 32 * 1024 * 1024
"""Step-peak growth below this is allocator noise, whatever the share."""
DEFAULT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
EXIT_ERROR = 2
"""A run failed (no GPU, no vLLM, no model): no verdict."""
DEFAULT_NUM_BLOCKS = (1024, 2048)


@dataclass(frozen=True)
class StepMemory:
    """One run: the KV cache size and torch's allocated bytes around ``generate``."""

    num_gpu_blocks: int
    baseline_bytes: int
    """``memory_allocated`` after start-up: weights, KV cache, persistent buffers."""
    peak_bytes: int
    """``max_memory_allocated`` during ``generate``."""
    num_prompts: int
    num_generated_tokens: int

    @property
    def step_bytes(self) -> int:
        """What the steps allocated on top of the baseline at their peak."""
        return self.peak_bytes - self.baseline_bytes


def prompts(count: int, num_fewshot: int = 5, seed: int = 0) -> list[str]:
    """gsm8k-format 5-shot prompts in lm-eval's gsm8k format (generated problems)."""
    train, test = make_split(seed, "train", count * num_fewshot), make_split(seed, "test", count)
    shots = [f"Question: {p.question}\nAnswer: {p.answer}\n\n" for p in train]
    return [
        "".join(shots[i * num_fewshot : (i + 1) * num_fewshot])
        + f"Question: {problem.question}\nAnswer:"
        for i, problem in enumerate(test)
    ]


def measure(
    model: str, num_gpu_blocks: int, *, num_prompts: int = 64, max_tokens: int = 64
) -> StepMemory:
    """Start vLLM with ``num_gpu_blocks_override`` in this process and measure ``generate``."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core runs in this process
    torch: Any = importlib.import_module("torch")
    vllm: Any = importlib.import_module("vllm")
    llm = vllm.LLM(
        model=model,
        num_gpu_blocks_override=num_gpu_blocks,
        enforce_eager=True,
        max_model_len=4096,
        seed=0,
    )
    params = vllm.SamplingParams(temperature=0.0, max_tokens=max_tokens, stop=["Question:"])
    torch.cuda.synchronize()
    baseline = int(torch.cuda.memory_allocated())
    torch.cuda.reset_peak_memory_stats()
    outputs = llm.generate(prompts(num_prompts), params, use_tqdm=False)
    torch.cuda.synchronize()
    return StepMemory(
        num_gpu_blocks=num_gpu_blocks,
        baseline_bytes=baseline,
        peak_bytes=int(torch.cuda.max_memory_allocated()),
        num_prompts=num_prompts,
        num_generated_tokens=sum(len(o.outputs[0].token_ids) for o in outputs),
    )


def verdict(small: StepMemory, large: StepMemory) -> dict[str, Any]:
    """Whether the steps' peak grew with the KV cache (see the module docstring)."""
    kv_growth = large.baseline_bytes - small.baseline_bytes
    step_growth = large.step_bytes - small.step_bytes
    limit = max(NOISE_BYTES, int(MAX_GROWTH_SHARE * kv_growth))
    return {
        "runs": [asdict(small), asdict(large)],
        "kv_cache_growth_bytes": kv_growth,
        "step_peak_growth_bytes": step_growth,
        "allowed_growth_bytes": limit,
        "scales_with_num_blocks": step_growth > limit,
    }


def _measure_in_subprocess(args: argparse.Namespace, num_gpu_blocks: int) -> StepMemory:
    command = [sys.executable, "-m", "harness.eval.vllm_probe", "measure", "--model", args.model]
    command += ["--num-gpu-blocks", str(num_gpu_blocks), "--num-prompts", str(args.num_prompts)]
    command += ["--max-tokens", str(args.max_tokens)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        sys.stderr.write(f"vLLM run with num_gpu_blocks_override={num_gpu_blocks} failed\n")
        raise SystemExit(EXIT_ERROR)
    return StepMemory(**json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.eval.vllm_probe", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("measure", "compare"):
        command = sub.add_parser(name)
        command.add_argument("--model", default=DEFAULT_MODEL)
        command.add_argument("--num-prompts", type=int, default=64)
        command.add_argument("--max-tokens", type=int, default=64)
    sub.choices["measure"].add_argument("--num-gpu-blocks", type=int, required=True)
    sub.choices["compare"].add_argument(
        "--num-blocks", type=int, nargs=2, default=list(DEFAULT_NUM_BLOCKS), metavar=("A", "B")
    )
    args = parser.parse_args(argv)
    if args.command == "measure":
        run = measure(
            args.model,
            args.num_gpu_blocks,
            num_prompts=args.num_prompts,
            max_tokens=args.max_tokens,
        )
        print(json.dumps(asdict(run)))
        return 0
    small, large = sorted(args.num_blocks)
    if small == large:
        parser.error("--num-blocks needs two different values")
    result = verdict(_measure_in_subprocess(args, small), _measure_in_subprocess(args, large))
    print(json.dumps(result, indent=2))
    return 1 if result["scales_with_num_blocks"] else 0


if __name__ == "__main__":
    sys.exit(main())
