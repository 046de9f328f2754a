"""The one engine loop: hooks around each step, ``run`` to completion, the only update call."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness
from harness.errors import HarnessError
from harness.reference.engine import Engine, EngineStep, start_engine
from harness.reference.scenarios import get_scenario
from harness.reference.scheduler import Request


def _engine(**kwargs: object) -> Engine:
    scenario = get_scenario("mixed-prefill-decode")
    return start_engine(scenario.vllm_config, "FLASH_ATTN", 64, **kwargs)  # type: ignore[arg-type]


def test_run_steps_until_every_request_is_finished_and_hooks_see_each_step() -> None:
    wrapped: list[tuple[str, int]] = []

    @contextlib.contextmanager
    def wrap(step: int) -> Iterator[None]:
        wrapped.append(("enter", step))
        yield
        wrapped.append(("exit", step))

    engine = _engine(wrap_step=wrap)
    engine.add_requests([Request("a", [1, 2, 3], 3), Request("b", [4] * 9, 2)])
    seen: list[EngineStep] = []
    assert engine.run(seen.append) == len(seen) == engine.num_steps > 0
    assert not engine.has_unfinished_requests()
    assert [s.index for s in seen] == list(range(len(seen)))
    assert wrapped == [(kind, i) for i in range(len(seen)) for kind in ("enter", "exit")]
    assert seen[0].scheduler_output.num_scheduled_tokens == {"a": 3, "b": 9}


def test_max_steps_bounds_the_run_and_a_later_run_continues() -> None:
    engine = _engine()
    engine.add_requests([Request("a", [1, 2, 3], 5)])
    assert engine.run(max_steps=2) == 2 and engine.has_unfinished_requests()
    assert engine.run() == 3 and not engine.has_unfinished_requests()


def test_an_engine_needs_an_initialised_kv_cache() -> None:
    from harness.reference.runner import ModelRunner

    runner = ModelRunner(get_scenario("single-prefill").vllm_config, "cpu", "FLASH_ATTN")
    with pytest.raises(ValueError, match="KV cache is initialised"):
        Engine(runner)


def test_the_engine_is_the_one_caller_of_update_from_output() -> None:
    package = Path(harness.__file__).parent
    callers = sorted(
        str(path.relative_to(package.parent))
        for path in package.rglob("*.py")
        if re.search(r"\.update_from_output\(", path.read_text(encoding="utf-8"))
    )
    assert callers == ["harness/reference/engine.py"]


def test_a_model_flashinfer_cannot_plan_is_refused_before_any_step() -> None:
    """vLLM 0.9.0's FlashInfer needs one window for all layers; the hybrid model has two."""
    hybrid = get_scenario("hybrid-two-groups").vllm_config
    with pytest.raises(HarnessError, match=r"tiny-hybrid cannot run on FlashInfer \(as in vLLM"):
        start_engine(hybrid, "FLASHINFER", 64)
    start_engine(hybrid, "FLASH_ATTN", 64)  # the same model on another backend starts
