"""``harness hunt``: every check this project has, on built-in defaults, as one list of rows.

Sections, in order (a row *misbehaves* when its verdict is not the one expected; the job fails if
any row misbehaves or the scanned tree holds a proven crash):

1. ``overrides`` -- the strict override checker over ``PATH`` (default: the reference
   implementation); an ``error`` finding is a proven crash.
2. ``catalog`` -- every catalog entry verified (:func:`harness.regressions.verify.verify`).
3. ``scaling`` -- the scaling detector on the reference FlashInfer and FlashAttention backends,
   then on each entry's buggy variant where the reference model can run it (reported, not judged).
4. ``gsm8k`` -- vLLM's sizing and the whole gsm8k workload on each device profile, with the
   reference FlashInfer backend (must fit) and ``flashinfer-oom``'s buggy variant (must OOM).
5. ``budget`` -- what the reference run uses beyond ``gpu_memory_utilization x capacity`` must fit
   in the ``(1 - gpu_memory_utilization) x capacity`` margin; the row says how much it takes.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from harness.overrides import CheckOptions
    from harness.regressions import Regression
    from harness.regressions.entry import Variant
    from harness.regressions.verify import VerifyResult
    from harness.simulation.simulate import SimulationResult

DEFAULT_DEVICES = ("h100-95", "b200")
"""The two GPUs vLLM's FlashInfer gsm8k OOM was reported on (2.12 GiB and 4.50 GiB)."""
DEFAULT_MODEL = "llama-3.1-8b"
QUICK_SCALING_STEPS = 2

Expect = Literal["pass", "fail"]


@dataclass
class Row:
    """One check of the hunt."""

    section: str
    name: str
    verdict: str
    """``pass``, ``FAIL`` (the check found something), ``error`` (it could not run) or ``n/a``."""
    expected: Expect | None
    """What the verdict should be; None for rows that report without judging."""
    detail: str
    seconds: float
    crash: bool = False
    """A proven crash in the scanned tree (override checker ``error`` findings)."""

    @property
    def misbehaves(self) -> bool:
        if self.expected is None:
            return self.verdict == "error"
        return self.verdict != ("pass" if self.expected == "pass" else "FAIL")

    def to_dict(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "check": self.name,
            "verdict": self.verdict,
            "expected": self.expected,
            "misbehaves": self.misbehaves,
            "crash": self.crash,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class HuntReport:
    """Every row, plus what the report files need (catalog results, simulations)."""

    path: str
    devices: tuple[str, ...]
    rows: list[Row] = field(default_factory=list[Row])
    catalog: list[VerifyResult] = field(default_factory=list["VerifyResult"])
    simulations: dict[str, SimulationResult] = field(default_factory=dict[str, "SimulationResult"])
    """``reference@<device>`` and ``flashinfer-oom@<device>``."""
    seconds: float = 0.0

    @property
    def crash(self) -> bool:
        return any(r.crash for r in self.rows)

    @property
    def ok(self) -> bool:
        return not self.crash and not any(r.misbehaves for r in self.rows)


Progress = Callable[[str, int, int], None]
"""(what runs now, rows done, rows planned)."""


def hunt(
    path: Path | None = None,
    *,
    devices: tuple[str, ...] = DEFAULT_DEVICES,
    entries: Sequence[Regression] | None = None,
    quick: bool = False,
    allow_empty: bool = False,
    progress: Progress | None = None,
    vllm_src: Path | None = None,
) -> HuntReport:
    """Run every section (see the module docstring) and return the report.

    ``entries`` defaults to the whole catalog. ``quick`` bounds the runs: the scaling detector
    compares the first :data:`QUICK_SCALING_STEPS` steps and each gsm8k simulation stops after
    its first step (where ``flashinfer-oom`` dies). ``path`` is checked with its own
    ``[tool.harness.overrides]`` configuration, as ``harness overrides PATH`` does; with no
    Python file in it to check, the overrides row is an error unless ``allow_empty``.
    ``vllm_src`` (a vLLM tree) adds its rows: the override checker on it and the scaling
    detector on its own builders (:mod:`harness.adapter.hunt_rows`).
    """
    import harness.reference
    from harness.memory.devices import get_device_profile
    from harness.memory.threads import one_torch_thread
    from harness.reference.backends import get_attn_backend
    from harness.regressions import REGRESSIONS
    from harness.regressions.entry import Variant

    started = time.perf_counter()
    target = path if path is not None else Path(harness.reference.__file__).parent
    for device in devices:
        get_device_profile(device)  # unknown names fail now, listing the known ones
    entries = list(REGRESSIONS.values()) if entries is None else list(entries)
    scaling_steps = QUICK_SCALING_STEPS if quick else None
    gsm8k_steps = 1 if quick else None
    report = HuntReport(str(target), devices)
    plan = 1 + len(entries) + 2 + len(entries) + 3 * len(devices)
    say: Progress = progress or (lambda what, done, total: None)
    add = report.rows.append
    with one_torch_thread():
        say(f"overrides {target}", 0, plan)
        add(_overrides(target, configured=path is not None, allow_empty=allow_empty))
        for entry in entries:
            say(f"catalog {entry.id}", len(report.rows), plan)
            add(_catalog(entry, report))
        for name in ("FLASHINFER", "FLASH_ATTN"):
            say(f"scaling: reference {name}", len(report.rows), plan)
            add(
                _scaling(
                    f"reference {name}", Variant(get_attn_backend(name)), "pass", scaling_steps
                )
            )
        for entry in entries:
            say(f"scaling: {entry.id}", len(report.rows), plan)
            add(_entry_scaling(entry, scaling_steps))
        for device in devices:
            say(f"gsm8k on {device}: reference", len(report.rows), plan)
            add(_gsm8k(report, device, None, gsm8k_steps))
            say(f"gsm8k on {device}: flashinfer-oom", len(report.rows), plan)
            add(_gsm8k(report, device, "flashinfer-oom", gsm8k_steps))
            say(f"budget on {device}", len(report.rows), plan)
            add(_budget(report, device))
        if vllm_src is not None:
            from harness.adapter.hunt_rows import tree_rows
            from harness.vllm_tree.tree import locate_tree

            tree = locate_tree(vllm_src)
            package = tree.root / "vllm"
            report.rows.extend(
                tree_rows(
                    tree,
                    quick=quick,
                    overrides_row=lambda: _overrides(package, configured=True, allow_empty=False),
                    say=lambda what: say(what, len(report.rows), plan),
                )
            )
    say("done", plan, plan)
    report.seconds = time.perf_counter() - started
    return report


def _timed(
    section: str, name: str, expected: Expect | None, run: Callable[[], tuple[str, str, bool]]
) -> Row:
    """A row from ``run() -> (verdict, detail, crash)``; an exception, or ``sys.exit()`` in
    what the row runs or in one of its threads, is an ``error`` row (only Ctrl-C ends the hunt)."""
    from harness.child import thread_failures
    from harness.errors import describe_error

    started = time.perf_counter()
    with thread_failures() as failures:
        try:
            verdict, detail, crash = run()
        except (Exception, SystemExit) as exc:
            verdict, detail, crash = "error", describe_error(exc), False
    if failures and verdict != "error":
        verdict, detail, crash = "error", failures[0], False
    return Row(section, name, verdict, expected, detail, time.perf_counter() - started, crash)


def _check_options(target: Path, *, configured: bool) -> CheckOptions:
    """The checker's options for ``target``: its project's configuration (discovered as
    ``harness overrides`` discovers it), or the built-in defaults for our own reference."""
    from harness.overrides import CheckOptions
    from harness.overrides.config import discover_config, working_directory
    from harness.overrides.rules import get

    config = discover_config([str(target)], working_directory(), isolated=not configured)
    return CheckOptions(
        select=frozenset(get(code).code for code in config.select),
        ignore=frozenset(get(code).code for code in config.ignore),
        cache_dir=None,
        baseline=config.baseline,
        excluder=config.excluder,
    )


def overrides_files(target: Path) -> int:
    """How many Python files the overrides row would check under ``target`` (a user's tree,
    with its configuration)."""
    from harness.overrides.config import working_directory
    from harness.overrides.discover import discover

    options = _check_options(target, configured=True)
    files, unreadable = discover([str(target)], working_directory(), options.excluder)
    return len(files) + len(unreadable)


def _overrides(target: Path, *, configured: bool, allow_empty: bool) -> Row:
    def run() -> tuple[str, str, bool]:
        from harness.overrides import Severity, check
        from harness.overrides.cli import nothing_to_check

        result = check([str(target)], options=_check_options(target, configured=configured))
        errors = [f for f in result.findings if f.severity is Severity.ERROR]
        num_warnings = len(result.findings) - len(errors)
        if not result.stats.files and not result.findings and not allow_empty:
            return "error", nothing_to_check([str(target)]), False
        head = f"{result.stats.files} files, {result.stats.classes} classes: "
        if errors:
            listed = "; ".join(f"{f.path}:{f.line} {f.code} {f.message}" for f in errors[:3])
            return "FAIL", f"{head}{len(errors)} proven crash(es): {listed}", True
        return "pass", f"{head}no error finding ({num_warnings} warning(s))", False

    return _timed("overrides", str(target), "pass", run)


def _installed(entry: Regression) -> bool:
    """A user's registered entry (an entry point): its rows run in a child process, so that an
    ``os._exit()`` or a native crash in its code is an error row, not the end of the hunt."""
    from harness.regressions.registry import REGRESSIONS, is_builtin

    return REGRESSIONS.get(entry.id) is entry and not is_builtin(entry.id)


def _catalog(entry: Regression, report: HuntReport) -> Row:
    def run() -> tuple[str, str, bool]:
        from harness.regressions.isolated import verify_in_child
        from harness.regressions.verify import verify

        (result,) = [verify_in_child(entry.id)] if _installed(entry) else verify([entry])
        report.catalog.append(result)
        checks = ", ".join(
            f"{r.check}/{r.role}={r.verdict}" for r in result.runs if not r.as_expected
        )
        if result.ok:
            names = ", ".join(dict.fromkeys(r.check for r in result.runs))
            return "pass", f"{len(result.runs)} runs ({names}): fail on buggy, pass on fixed", False
        return "FAIL", f"misbehaves: {checks}", False

    return _timed("catalog", entry.id, "pass", run)


def _scaling(name: str, variant: Variant, expected: Expect | None, max_steps: int | None) -> Row:
    def run() -> tuple[str, str, bool]:
        from harness.regressions.checks import run_scaling

        report = run_scaling(variant, max_steps=max_steps)
        if report.ok:
            return "pass", f"only the KV cache scales ({report.num_steps} steps)", False
        first = report.findings[0].describe().replace("\n", " ")
        return "FAIL", f"{len(report.findings)} site(s) scale with num_blocks; {first}", False

    return _timed("scaling", name, expected, run)


def entry_scaling_row(entry_id: str, max_steps: int | None) -> dict[str, Any]:
    """The child's side of a user's entry's scaling row (:func:`_entry_scaling`)."""
    from harness.regressions import get_regression

    row = _entry_scaling(get_regression(entry_id), max_steps, in_child=True)
    return asdict(row)


def _entry_scaling_in_child(entry: Regression, max_steps: int | None) -> Row:
    """:func:`_entry_scaling` of a user's entry in a child process (:mod:`harness.child`)."""
    from harness.child import run_in_child
    from harness.errors import ChildError

    started = time.perf_counter()
    try:
        return Row(**run_in_child("harness.hunt.job:entry_scaling_row", entry.id, max_steps))
    except ChildError as exc:
        last = f"; its last line: {exc.last_lines[-1]}" if exc.last_lines else ""
        detail = f"{exc.summary()}{last}"
        name = f"{entry.id} (buggy)"
        return Row("scaling", name, "error", None, detail, time.perf_counter() - started)


def _entry_scaling(entry: Regression, max_steps: int | None, *, in_child: bool = False) -> Row:
    from harness.reference.backends.mla.common import MLACommonBackend
    from harness.reference.config import ConfigReadOutsideContextWarning

    if not in_child and _installed(entry):
        return _entry_scaling_in_child(entry, max_steps)
    buggy = entry.buggy
    if buggy.runner is not None or issubclass(buggy.backend, MLACommonBackend):
        why = "perturbs the runner" if buggy.runner is not None else "MLA (no MLA model)"
        return Row("scaling", f"{entry.id} (buggy)", "n/a", None, why, 0.0)
    with warnings.catch_warnings():  # flashinfer-global-config's variant warns by design
        warnings.simplefilter("ignore", ConfigReadOutsideContextWarning)
        return _scaling(f"{entry.id} (buggy)", buggy, None, max_steps)


def _gsm8k(report: HuntReport, device: str, regression: str | None, max_steps: int | None) -> Row:
    label = regression or "reference"
    expected: Expect = "pass" if regression is None else "fail"

    def run() -> tuple[str, str, bool]:
        from harness.memory.sizes import format_size
        from harness.regressions import get_regression
        from harness.regressions.checks import run_simulation

        # None: the reference FlashInfer backend, and no regression label on the plot.
        variant = None if regression is None else get_regression(regression).buggy
        result = run_simulation(
            variant, device=device, model=DEFAULT_MODEL, max_steps=max_steps, label=regression
        )
        report.simulations[f"{label}@{device}"] = result
        blocks = "" if result.sizing is None else f"{result.sizing.num_blocks} blocks; "
        if result.oom is not None:
            return "FAIL", f"{blocks}OOM at step {result.oom_step}: {oom_head(result)}", False
        return (
            "pass",
            f"{blocks}{len(result.steps)} steps, {result.num_finished}/{result.num_requests} "
            f"requests, peak {format_size(result.peak_bytes)}",
            False,
        )

    return _timed("gsm8k", f"{label} on {device}", expected, run)


def oom_head(result: SimulationResult) -> str:
    """The first sentences of the out-of-memory message, up to how much was free."""
    first = str(result.oom).splitlines()[0]
    return first.split(" Including non-PyTorch memory", 1)[0]


def _budget(report: HuntReport, device: str) -> Row:
    def run() -> tuple[str, str, bool]:
        from harness.memory.sizes import format_size

        result = report.simulations.get(f"reference@{device}")
        if result is None:
            raise RuntimeError(f"the reference gsm8k run on {device} did not complete")
        capacity, util = result.device.total_memory, result.gpu_memory_utilization
        used = result.peak_bytes + result.non_torch_bytes
        share = int(capacity * util)
        margin = capacity - share
        beyond = max(0, used - share)
        detail = (
            f"peak {format_size(result.peak_bytes)} + non-torch "
            f"{format_size(result.non_torch_bytes)}: {format_size(beyond)} beyond {util:g} x "
            f"capacity, {100 * beyond / margin:.1f}% of the {format_size(margin)} margin"
        )
        return ("pass" if beyond <= margin else "FAIL"), detail, False

    return _timed("budget", f"reference on {device}", "pass", run)
