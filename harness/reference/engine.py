"""The one engine loop: schedule, execute, update (vLLM's ``EngineCore.step``, nano-vllm's ``step``).

:class:`Engine` steps a runner and a scheduler together; drivers observe it through ``wrap_step``,
``after_execute`` and ``run(on_step=...)``. :func:`start_engine` sets one up with a KV cache of a
given block count; :func:`tracking` is the set-up of a tracked run (``docs/architecture.md``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass

import torch

from harness.memory.ledger import Ledger
from harness.memory.threads import one_torch_thread
from harness.memory.tracker import MemoryTracker
from harness.reference.backends.abstract import AttentionBackend
from harness.reference.backends.flashinfer import FlashInferBackend, refuse_mixed_layers
from harness.reference.config import VllmConfig
from harness.reference.kv_cache_utils import kv_cache_config_for_num_blocks
from harness.reference.outputs import ModelRunnerOutput, SchedulerOutput
from harness.reference.runner import ModelRunner
from harness.reference.scheduler import Request, Scheduler

StepHook = Callable[[int], contextlib.AbstractContextManager[object]]
"""Called with the step's index; the context manager it returns wraps the whole step."""


@dataclass(frozen=True, slots=True)
class EngineStep:
    """One step: its index, what the scheduler scheduled and what the runner returned."""

    index: int
    scheduler_output: SchedulerOutput
    runner_output: ModelRunnerOutput


class Engine:
    """A scheduler and a runner stepped together (see the module docstring)."""

    def __init__(
        self,
        runner: ModelRunner,
        *,
        trace: bool = False,
        wrap_step: StepHook | None = None,
        after_execute: Callable[[], object] | None = None,
    ) -> None:
        if runner.kv_cache_config is None:
            raise ValueError("the engine needs a runner whose KV cache is initialised")
        self.runner = runner
        self.scheduler = Scheduler(runner.vllm_config.scheduler_config, runner.kv_cache_config)
        self.trace = trace
        self.wrap_step = wrap_step
        self.after_execute = after_execute
        self.num_steps = 0

    def add_requests(self, requests: Iterable[Request]) -> None:
        for request in requests:
            self.scheduler.add_request(request)

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    def step(self) -> EngineStep:
        """Schedule, execute and update once (the one caller of ``update_from_output``)."""
        index = self.num_steps
        wrap = contextlib.nullcontext() if self.wrap_step is None else self.wrap_step(index)
        with wrap:
            scheduler_output = self.scheduler.schedule()
            runner_output = self.runner.execute_model(scheduler_output, trace=self.trace)
            if self.after_execute is not None:
                self.after_execute()
            self.scheduler.update_from_output(scheduler_output, runner_output)
        self.num_steps += 1
        return EngineStep(index, scheduler_output, runner_output)

    def run(
        self, on_step: Callable[[EngineStep], object] | None = None, *, max_steps: int | None = None
    ) -> int:
        """Step until every request is finished (or ``max_steps`` steps in all); returns how many
        steps this call ran."""
        first = self.num_steps
        while self.has_unfinished_requests():
            if max_steps is not None and self.num_steps >= max_steps:
                break
            step = self.step()
            if on_step is not None:
                on_step(step)
        return self.num_steps - first


def start_engine(
    vllm_config: VllmConfig,
    backend: str | type[AttentionBackend],
    num_blocks: int,
    *,
    device: str = "cpu",
    runner_cls: type[ModelRunner] = ModelRunner,
    seed: int = 0,
    profile: bool = False,
    kv_cache_region: contextlib.AbstractContextManager[object] | None = None,
    trace: bool = False,
    wrap_step: StepHook | None = None,
) -> Engine:
    """A runner of ``backend`` with a KV cache of exactly ``num_blocks`` blocks, and its engine;
    ``profile`` runs ``profile_run`` first, ``kv_cache_region`` wraps the KV cache's allocation.
    A model FlashInfer cannot plan (:func:`refuse_mixed_layers`) is a one-line error first.
    """
    runner = runner_cls(vllm_config, device, backend, seed=seed)
    if issubclass(runner.attn_backend_cls, FlashInferBackend):
        refuse_mixed_layers(vllm_config)  # vLLM 0.9.0 fails the first step: say so first
    if profile:
        runner.profile_run()
    kv_cache_config = kv_cache_config_for_num_blocks(
        vllm_config, runner.get_kv_cache_spec(), num_blocks
    )
    with kv_cache_region or contextlib.nullcontext():
        runner.initialize_kv_cache(kv_cache_config)
    return Engine(runner, trace=trace, wrap_step=wrap_step)


def memory_tracker(ledger: Ledger, device: str | torch.device) -> MemoryTracker:
    """The tracker every driver uses: ``device``'s allocations, in every Python thread."""
    return MemoryTracker(ledger, devices=(torch.device(device).type,), all_threads=True)


@contextlib.contextmanager
def tracking(tracker: MemoryTracker | None) -> Generator[None, None, None]:
    """Inference mode and one torch thread, under ``tracker`` when there is one."""
    with (
        contextlib.nullcontext() if tracker is None else tracker,
        torch.inference_mode(),
        one_torch_thread(),
    ):
        yield
