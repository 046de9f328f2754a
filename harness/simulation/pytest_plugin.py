"""pytest plugin (``pytest11`` entry point ``harness_simulation``): the ``harness_simulate`` fixture.

``harness_simulate(MyBackend, model=..., device=..., workload=...)`` runs
:func:`harness.simulation.simulate.simulate` with a backend class and returns its result. It
steps outside the test's memory budget (the body's tracker and ``meta`` default device are set
aside); a failing report shows each simulation's summary. Torch is imported when it runs.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from harness.memory.pytest_plugin import require_torch

if TYPE_CHECKING:
    from harness.reference.backends.abstract import AttentionBackend
    from harness.simulation.simulate import SimulationResult
    from harness.simulation.workload import Workload

_SIMULATIONS = pytest.StashKey[list[tuple[str, "SimulationResult"]]]()


class Simulator:
    """The ``harness_simulate`` fixture: run a backend through ``simulate`` from inside a test."""

    def __init__(self, runs: list[tuple[str, SimulationResult]]) -> None:
        self.runs = runs
        """(backend ``module:qualname``, result) of every simulation this test ran, in order."""

    def __call__(
        self,
        backend: type[AttentionBackend] | None = None,
        *,
        model: str,
        device: str,
        workload: Workload | str,
        **options: Any,
    ) -> SimulationResult:
        """``simulate(...)`` outside the test's budget; ``workload`` may be a name (``"tiny"``)."""
        from harness.simulation.simulate import simulate
        from harness.simulation.workload import get_workload
        from harness.torch_compat import no_torch_modes

        chosen = get_workload(workload) if isinstance(workload, str) else workload
        if backend is not None:
            options.setdefault("regression", f"{backend.__module__}:{backend.__qualname__}")
        # A simulation under the budget's tracker and meta device would be counted twice.
        with no_torch_modes():
            result = simulate(
                model=model, device=device, workload=chosen, backend=backend, **options
            )
        self.runs.append((options.get("regression") or "the reference backend", result))
        return result


@pytest.fixture
def harness_simulate(request: pytest.FixtureRequest) -> Simulator:
    """Run an attention backend through harness.simulation.simulate; see :class:`Simulator`."""
    require_torch("harness_simulate")
    runs: list[tuple[str, SimulationResult]] = []
    request.node.stash[_SIMULATIONS] = runs
    return Simulator(runs)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when != "call" or not report.failed:
        return report
    try:
        runs = item.stash.get(_SIMULATIONS, None) or []
        for i, (label, result) in enumerate(runs):
            report.sections.append((f"harness simulate #{i + 1}: {label}", result.format()))
    except Exception as exc:  # a bug here must not stop the session
        report.sections.append(("harness simulate", f"{type(exc).__name__}: {exc}"))
    return report
