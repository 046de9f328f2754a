"""Checks that run a variant and say whether it shows a bug: reusable by entries, users and hunt.

Each factory (``overrides_check``, ``oracle_check``, ``scaling_check``, ``simulate_check``)
returns a :class:`~harness.regressions.entry.Check` whose ``run(variant)`` returns
``CheckOutcome(failed=True, ...)`` when it found a bug; :func:`generic_checks` picks those that
apply to a user's backend. Entries add their own (see each entry module).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError
from harness.overrides.suppress import IGNORE_COMMENT
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.reference.backends.mla.common import MLACommonBackend
from harness.reference.config import VllmConfig
from harness.reference.engine import Engine, start_engine
from harness.reference.runner import ModelRunner
from harness.reference.scheduler import Request
from harness.regressions.entry import Check, CheckOutcome, Variant

if TYPE_CHECKING:
    from harness.simulation.scaling import ScalingReport
    from harness.simulation.simulate import SimulationResult


def variant_classes(variant: Variant) -> list[type]:
    """The classes a variant brings: backend, builder, impl, metadata, and runner if any."""
    b, runner = variant.backend, [] if variant.runner is None else [variant.runner]
    return [b, b.get_builder_cls(), b.get_impl_cls(), b.get_metadata_cls(), *runner]


def _source_file(cls: type) -> Path | None:
    top = cls.__module__.partition(".")[0]
    if top in sys.stdlib_module_names or top in ("torch", "numpy"):
        return None
    try:
        path = inspect.getsourcefile(cls)
    except TypeError:  # built in
        return None
    return None if path is None else Path(path).resolve()


def variant_engine(
    variant: Variant, vllm_config: VllmConfig, num_blocks: int, prompts: list[tuple[int, int]]
) -> Engine:
    """A CPU engine of the variant with ``num_blocks`` KV cache blocks, holding one request per
    ``(prompt_len, max_tokens)``; nothing executed yet."""
    engine = start_engine(
        vllm_config, variant.backend, num_blocks, runner_cls=variant.runner or ModelRunner
    )
    engine.add_requests(
        Request(f"req-{i}", [(7 * i + j) % 97 for j in range(prompt_len)], max_tokens)
        for i, (prompt_len, max_tokens) in enumerate(prompts)
    )
    return engine


# -- overrides -------------------------------------------------------------------------------


def overrides_check(*, honour_suppressions: bool = True) -> Check:
    """The override checker over the modules that define the variant's classes and their bases.

    Fails on an ``error`` finding (a call in the scanned code that the override rejects, with
    its ``TypeError``) in the modules of the variant's own classes. ``honour_suppressions=False``
    scans copies without ``# harness: ignore[...]`` comments (in a temporary tree that keeps the
    module names): a catalog entry's buggy variant carries one so that this project's own
    source stays clean under the checker.
    """

    def run(variant: Variant) -> CheckOutcome:
        from harness.overrides import CheckOptions, Severity, check

        classes = variant_classes(variant)
        modules = {b.__module__: p for c in classes for b in c.__mro__ if (p := _source_file(b))}
        own = {path for cls in classes if (path := _source_file(cls)) is not None}
        with _scannable(modules, honour_suppressions) as originals:
            result = check(list(map(str, originals)), options=CheckOptions(cache_dir=None, jobs=1))
            errors = [
                _describe(f.message, f.evidence, originals)
                for f in result.findings
                if f.severity is Severity.ERROR
                and f.evidence is not None
                and originals.get(Path(f.path).resolve()) in own
            ]
        if errors:
            return CheckOutcome(True, "\n".join(errors))
        names = ", ".join(sorted(p.name for p in own))
        return CheckOutcome(
            False,
            f"no error finding in {names} ({len(result.findings)} finding(s) in all, "
            f"{len(modules)} modules scanned)",
        )

    return Check(
        "overrides",
        "strict override checker on the variant's source: no proven TypeError at a call site",
        run,
    )


@contextlib.contextmanager
def _scannable(modules: dict[str, Path], honour: bool) -> Generator[dict[Path, Path], None, None]:
    """The files to scan, each mapped to its original."""
    if honour:
        yield {path: path for path in modules.values()}
        return
    with tempfile.TemporaryDirectory(prefix="harness-variant-") as tmp:
        originals: dict[Path, Path] = {}
        for name, original in modules.items():
            parts = name.split(".")
            package = parts if original.name == "__init__.py" else parts[:-1]
            for depth in range(1, len(package) + 1):
                Path(tmp, *package[:depth]).mkdir(exist_ok=True)
                Path(tmp, *package[:depth], "__init__.py").touch()  # keeps a copy made already
            copy = Path(tmp, *package, "__init__.py" if package == parts else f"{parts[-1]}.py")
            copy.write_text(IGNORE_COMMENT.sub("", original.read_text(encoding="utf-8")))
            originals[copy.resolve()] = original
        yield originals


def _describe(message: str, evidence: object, originals: dict[Path, Path]) -> str:
    from harness.overrides import Evidence

    assert isinstance(evidence, Evidence)
    call = Path(evidence.path).resolve()
    where = _display(originals.get(call, call))
    for copy, original in originals.items():  # messages name the scanned copies' paths
        message = message.replace(str(copy), _display(original))
    return (
        f"{message}\n  call: {where}:{evidence.line}: {evidence.text}\n  raises: {evidence.error}"
    )


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# -- oracle ----------------------------------------------------------------------------------


def oracle_check(scenario: str) -> Check:
    """Scenario ``scenario`` with the variant's backend: paged attention must equal dense."""

    def run(variant: Variant) -> CheckOutcome:
        from harness.reference.scenarios import get_scenario, run_scenario

        if variant.runner is not None:
            raise HarnessError("oracle checks run the reference runner; this variant replaces it")
        try:
            result = run_scenario(get_scenario(scenario), variant.backend)
        except HarnessError:
            raise
        except Exception as exc:  # the variant crashed: that is a find, with its error
            return CheckOutcome(True, f"{scenario}: {type(exc).__name__}: {exc}")
        bad = [s.step for s in result.steps if not s.oracle_ok]
        if bad:
            return CheckOutcome(
                True,
                f"{scenario}: paged attention differs from dense in step(s) {bad} "
                f"(max |paged - dense| {result.max_abs_err:.3g})",
            )
        return CheckOutcome(
            False,
            f"{scenario}: {len(result.steps)} steps match dense (max |paged - dense| "
            f"{result.max_abs_err:.2g})",
        )

    return Check(
        f"oracle:{scenario}",
        f"scenario {scenario!r} through scheduler, runner and the paged-vs-dense oracle",
        run,
    )


# -- memory ----------------------------------------------------------------------------------


def run_scaling(variant: Variant, *, model: str = "tiny", max_steps: int | None) -> ScalingReport:
    """The scaling detector on ``model`` and the tiny workload, with the variant's backend."""
    from harness.simulation.scaling import detect_scaling
    from harness.simulation.workload import get_workload

    if variant.runner is not None:
        raise HarnessError("the scaling detector runs the reference runner")
    return detect_scaling(
        model=model, workload=get_workload("tiny"), backend=variant.backend, max_steps=max_steps
    )


def scaling_check(*, model: str = "tiny", max_steps: int | None = 2) -> Check:
    """The scaling detector on ``model``: only the KV cache may scale with ``num_blocks``."""

    def run(variant: Variant) -> CheckOutcome:
        report = run_scaling(variant, model=model, max_steps=max_steps)
        if report.ok:
            return CheckOutcome(
                False, f"only the KV cache scales with num_blocks ({report.num_steps} steps)"
            )
        return CheckOutcome(True, "\n".join(f.describe() for f in report.findings))

    steps = "every step" if max_steps is None else f"the first {max_steps} steps"
    return Check(
        "scaling",
        f"scaling detector on {model} ({steps}): only the KV cache scales with num_blocks",
        run,
    )


def run_simulation(
    variant: Variant | None, *, device: str, model: str, max_steps: int | None, label: str | None
) -> SimulationResult:
    """vLLM's sizing, then gsm8k on a simulated ``device``; ``None`` runs the reference FlashInfer
    backend. ``label`` names the variant in the report (``None``: the backend's class name)."""
    from harness.simulation.simulate import simulate
    from harness.simulation.workload import gsm8k

    if variant is not None and variant.runner is not None:
        raise HarnessError("the simulation runs the reference runner")
    return simulate(
        model=model,
        device=device,
        workload=gsm8k(),
        backend=None if variant is None else variant.backend,
        regression=label,
        max_steps=max_steps,
    )


def simulate_check(
    *, device: str = "h100-95", model: str = "llama-3.1-8b", max_steps: int | None = None
) -> Check:
    """vLLM's sizing, then gsm8k on a simulated ``device``: every allocation must fit."""

    def run(variant: Variant) -> CheckOutcome:
        from harness.memory.sizes import format_size

        result = run_simulation(
            variant, device=device, model=model, max_steps=max_steps, label=variant.label
        )
        blocks = "" if result.sizing is None else f"num_blocks {result.sizing.num_blocks}: "
        if result.oom is not None:
            first = str(result.oom).splitlines()[0]
            return CheckOutcome(True, f"{blocks}out of memory at step {result.oom_step}: {first}")
        return CheckOutcome(
            False,
            f"{blocks}{len(result.steps)} steps fit (peak {format_size(result.peak_bytes)} of "
            f"{format_size(result.device.total_memory)})",
        )

    bound = "the whole workload" if max_steps is None else f"the first {max_steps} step(s)"
    return Check(
        f"simulate:{device}",
        f"{model} gsm8k on a simulated {device} ({bound}): every allocation fits",
        run,
    )


GENERIC_SCENARIOS = ("mixed-prefill-decode", "preemption", "cascade-common-prefix")
"""Oracle scenarios for every (non-MLA) user backend: prefills joining decodes, decode-first
reordering; decodes that fill a 16-token block and spill into the next, preemption and recompute;
a cascade over a shared prefix."""
HYBRID_SCENARIOS = ("hybrid-unified", "hybrid-two-groups")
"""Full + sliding-window layers, in vLLM 0.9.0's one KV cache group and in later vLLM's group per
attention type: for backends that can serve such a model (vLLM 0.9.0's FlashInfer cannot)."""


def generic_checks(variant: Variant) -> tuple[Check, ...]:
    """The checks that apply to a user's backend. MLA backends get the static check only (the
    reference model has no MLA layers); FlashInfer backends skip the hybrid scenarios (vLLM 0.9.0's
    FlashInfer asserts that every layer of the model shares one window, so it refuses them)."""
    backend = variant.backend
    if issubclass(backend, MLACommonBackend):
        return (overrides_check(),)
    scenarios: tuple[str, ...] = GENERIC_SCENARIOS
    if not issubclass(backend, FlashInferBackend):
        scenarios += HYBRID_SCENARIOS
    return (
        overrides_check(),
        *(oracle_check(scenario) for scenario in scenarios),
        scaling_check(max_steps=2),
        simulate_check(max_steps=1),
    )
