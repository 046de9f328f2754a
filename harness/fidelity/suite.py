"""Run the differentials against one vLLM source tree and collect the results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessError
from harness.fidelity.differential import Differential, DifferentialResult, run_differential
from harness.fidelity.source import VllmSource
from harness.fidelity.vllm import open_vllm
from harness.memory.threads import one_torch_thread


@dataclass(frozen=True)
class FidelityReport:
    """Every differential's result against one vLLM source tree."""

    source: VllmSource
    seed: int
    results: list[DifferentialResult]

    @property
    def ok(self) -> bool:
        """True when every differential ran and agreed on every trial."""
        return bool(self.results) and all(r.ok for r in self.results)


def select(
    differentials: Sequence[Differential[Any]], names: Sequence[str] | None
) -> list[Differential[Any]]:
    """The differentials called ``names`` (all when None); an unknown name lists the others."""
    if not names:
        return list(differentials)
    by_name = {d.name: d for d in differentials}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise HarnessError(
            f"unknown differential {', '.join(map(repr, unknown))}; available: "
            + ", ".join(by_name)
        )
    return [d for d in differentials if d.name in names]


def run_fidelity(
    source: VllmSource,
    differentials: Sequence[Differential[Any]],
    *,
    seed: int = 0,
    trials: int | None = None,
) -> FidelityReport:
    """Load ``source``'s compared modules and run each differential on its random inputs."""
    if trials is not None and trials <= 0:
        raise HarnessError(f"--trials must be positive, got {trials}")
    modules = sorted({m for d in differentials for m in d.vllm_modules})
    with one_torch_thread(), open_vllm(source, modules) as vllm:  # tiny tensors: one thread
        results = [run_differential(d, vllm, seed=seed, trials=trials) for d in differentials]
    return FidelityReport(source, seed, results)
