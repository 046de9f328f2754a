"""Run the differentials against one vLLM source tree and collect the results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness.errors import HarnessError
from harness.fidelity.deviation import FoundDeviation, find_deviations
from harness.fidelity.differential import Differential, DifferentialResult, run_differential
from harness.fidelity.vllm import open_vllm
from harness.memory.threads import one_torch_thread
from harness.vllm_tree.era import tree_era
from harness.vllm_tree.tree import VllmTree


@dataclass(frozen=True)
class FidelityReport:
    """Every differential's result against one vLLM source tree."""

    tree: VllmTree
    seed: int
    results: list[DifferentialResult]

    @property
    def ok(self) -> bool:
        """True when every differential agreed on every trial or has only listed deviations."""
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
    tree: VllmTree,
    differentials: Sequence[Differential[Any]],
    *,
    seed: int = 0,
    trials: int | None = None,
) -> FidelityReport:
    """Find each differential's deviations in ``tree``, load the compared modules, and run
    every differential that has something left to compare on its random inputs."""
    if trials is not None and trials <= 0:
        raise HarnessError(f"--trials must be positive, got {trials}")
    tree_era(tree)  # a tree outside the supported eras is refused before anything loads
    plans: list[tuple[Differential[Any], list[FoundDeviation], tuple[str, ...] | None]] = []
    for differential in differentials:
        found = find_deviations(tree, differential.name, differential.deviations)
        compared = all(f.deviation.paths is not None for f in found)
        plans.append((differential, found, differential.vllm_modules(tree) if compared else None))
    modules = sorted({m for _, _, loaded in plans for m in loaded or ()})
    results: list[DifferentialResult] = []
    with one_torch_thread(), open_vllm(tree, modules) as vllm:  # tiny tensors: one thread
        for differential, found, loaded in plans:
            if loaded is None:  # a deviation leaves nothing to compare
                result = DifferentialResult(
                    differential.name,
                    differential.description,
                    differential.vllm_code,
                    trials=0,
                    agreed=0,
                    seconds=0.0,
                    deviations=tuple(found),
                )
            else:
                result = run_differential(
                    differential, vllm, seed=seed, trials=trials, deviations=found
                )
            results.append(replace(result, modules=loaded or ()))
    return FidelityReport(tree, seed, results)
