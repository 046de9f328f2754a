"""What ``harness eval gsm8k`` found: lm-eval's results, the engine's counts, the memory report.

:class:`EvalReport` is printed as text (lm-eval's results table, engine steps, preemptions,
tokens/s, then the memory report) or as one JSON object (``to_dict``) with ``results`` (lm-eval's
``results`` dict, metric keys unchanged such as ``exact_match,strict-match``; ``null`` when the
run died), ``engine`` and ``memory``. ``exit_code`` is 0 for a clean run and 1 for an
out-of-memory error or a breached ``--memory-budget``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.memory.ledger import AllocationSite, Ledger
from harness.memory.sizes import format_size
from harness.simulation.simulate import SimulationResult

TOP_SITES = 6
EXIT_OK = 0
EXIT_FOUND = 1
"""An out-of-memory error or a memory-budget breach."""


@dataclass
class MemoryReport:
    """Peak device memory of one run, where it went, and the out-of-memory error if any."""

    device: str
    """``cpu`` or ``meta:<profile>``."""
    peak_bytes: int
    top_sites: list[AllocationSite]
    """Live bytes by op and source line: at the out-of-memory error if any, else at the peak."""
    oom: dict[str, Any] | None = None
    """``requested_bytes``, ``free_bytes``, ``message``, ``op``, ``source`` (and ``step``)."""
    text: str = ""
    """The human report (the simulation's own on ``meta``)."""
    simulation: dict[str, Any] | None = None
    """On ``meta``: the deciding simulation's ``to_dict()`` (sizing, steps, peak)."""

    @classmethod
    def from_ledger(cls, ledger: Ledger) -> MemoryReport:
        """CPU: every allocation from model construction on, as the ledger counted it."""
        sites = ledger.sites_at_peak(TOP_SITES)
        where = f" ({ledger.peak_region})" if ledger.peak_region else ""
        lines = [f"cpu: peak {format_size(ledger.peak_bytes)}{where}; live memory at the peak:"]
        lines += ["  " + site.describe() for site in sites]
        return cls("cpu", ledger.peak_bytes, sites, None, "\n".join(lines))

    @classmethod
    def from_simulations(cls, device: str, results: Sequence[SimulationResult]) -> MemoryReport:
        """meta: the run that ran out of memory, else the one with the highest peak."""
        if not results:
            return cls(device, 0, [], None, f"{device}: nothing was simulated")
        failed = [r for r in results if r.oom is not None]
        deciding = failed[0] if failed else max(results, key=lambda r: r.peak_bytes)
        summary = deciding.to_dict()
        return cls(
            device,
            max(r.peak_bytes for r in results),
            list(deciding.top_sites[:TOP_SITES]),
            summary["oom"],
            deciding.format(),
            summary,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "peak_bytes": self.peak_bytes,
            "oom": self.oom,
            "top_sites": [asdict(site) for site in self.top_sites],
            "simulation": self.simulation,
        }


@dataclass
class EvalReport:
    """One ``harness eval gsm8k`` run."""

    config: dict[str, Any]
    """What was run: model, device, regression, data, limit, num_fewshot, batch_size."""
    results: dict[str, Any] | None
    """lm-eval's full results object (``None`` when the engine died)."""
    engine: dict[str, Any]
    memory: MemoryReport
    budget_bytes: int | None = None
    evaluation_time_s: float = 0.0
    """Wall time of lm-eval's ``simple_evaluate`` (engine set-up and data loading excluded)."""
    notes: list[str] = field(default_factory=list[str])

    @property
    def budget_breached(self) -> bool:
        return self.budget_bytes is not None and self.memory.peak_bytes > self.budget_bytes

    @property
    def exit_code(self) -> int:
        return EXIT_FOUND if self.memory.oom is not None or self.budget_breached else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "results": None if self.results is None else self.results["results"],
            "n-shot": None if self.results is None else self.results.get("n-shot"),
            "n-samples": None if self.results is None else self.results.get("n-samples"),
            "engine": self.engine,
            "memory": {
                **self.memory.to_dict(),
                "budget_bytes": self.budget_bytes,
                "budget_breached": self.budget_breached,
            },
            "evaluation_time_s": round(self.evaluation_time_s, 3),
            "notes": self.notes,
        }

    def format(self) -> str:
        import lm_eval.utils

        lm_utils: Any = lm_eval.utils  # lm-eval ships no type information
        lines: list[str] = []
        if self.results is not None:
            lines.append(str(lm_utils.make_table(self.results)).rstrip())
        else:
            lines.append("no results: the engine died before lm-eval finished")
        e = self.engine
        lines.append(
            f"engine: {e['steps']} steps, {e['num_requests']} requests in "
            f"{e['num_generate_calls']} generate call(s), {e['num_preemptions']} preemptions, "
            f"{e['num_prompt_tokens']} prompt + {e['num_generated_tokens']} generated tokens, "
            f"{e['tokens_per_s']:.0f} tokens/s"
        )
        lines.append(self.memory.text)
        if self.budget_bytes is not None:
            verdict = "EXCEEDED" if self.budget_breached else "within"
            lines.append(
                f"memory budget {format_size(self.budget_bytes)}: {verdict} "
                f"(peak {format_size(self.memory.peak_bytes)})"
            )
        lines.extend(self.notes)
        lines.append(f"evaluation: {self.evaluation_time_s:.1f} s")
        return "\n".join(lines)
