"""What a child process runs on one tree (:func:`run_job_in_child`); each result is JSON.

* ``list``: every backend of the tree (or those named) set up and driven over a short
  sequence: whether it runs, else the import or call that stops it.
* ``trace``: one backend under the memory tracker (every thread) at one ``num_gpu_blocks``:
  every allocation, by region (``layers``, ``initialize_kv_cache``, ``construct``, ``step N``).
* ``record``: one backend's run with each step's metadata snapshot (for ``harness diff``).

The functions run in this process too (the fast tests call them on fixture trees). In a child
(:mod:`harness.child`), ``VLLM_*`` is removed from the environment (``vllm.envs`` reads its
defaults) and Triton's CPU interpreter is on (``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator
from dataclasses import asdict
from typing import Any

from harness.adapter.backends import BackendEntry, discover_backends, select_backends
from harness.adapter.drive import BackendDriver, BackendRun, DriveOptions
from harness.adapter.platform import PlatformOptions
from harness.adapter.sequence import SequenceSpec, generate_sequence
from harness.adapter.session import BackendUnavailable, TreeSession, open_tree, raised_at
from harness.child import run_in_child
from harness.errors import ChildError, HarnessError
from harness.vllm_tree.tree import VllmTree, locate_tree

LIST_STEPS = 48
"""Steps each backend is driven for ``--list-backends`` (prefills, decodes, finished requests)."""
CHILD_TIMEOUT = 900.0
"""Seconds one job may run in its child (a tree whose code blocks forever is killed then)."""


def child_environment() -> dict[str, str]:
    """This process's environment without ``VLLM_*`` and with Triton's CPU interpreter on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env["TRITON_INTERPRET"] = "1"
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def run_job_in_child(work: dict[str, Any], what: str) -> Any:
    """:func:`run_job` of ``work`` in a child process (killed past :data:`CHILD_TIMEOUT`);
    errors name ``what`` ran."""
    try:
        return run_in_child(
            "harness.adapter.jobs:run_job",
            work,
            env=child_environment(),
            timeout=CHILD_TIMEOUT,
            isolated=True,
        )
    except HarnessError as exc:
        raise HarnessError(f"{what}: {exc}") from None
    except ChildError as exc:
        raise ChildError(f"{what}: {exc.how}", exc.step, exc.last_lines) from None


def _nothing(name: str) -> contextlib.AbstractContextManager[object]:
    del name
    return contextlib.nullcontext()


def _driven(
    session: TreeSession,
    entry: BackendEntry,
    steps: int,
    seed: int,
    *,
    blocks_factor: int = 1,
    record: bool = True,
    region: Any = _nothing,
) -> tuple[BackendRun, int]:
    """Set up and run ``entry``; returns the run and the ``num_gpu_blocks`` it had. Whatever
    stops the set-up is :class:`BackendUnavailable` (an exception of the tree's code names its
    line); an exception in a step ends the run (recorded in it)."""
    try:
        probe = BackendDriver(session, entry, DriveOptions())
        sequence = generate_sequence(
            SequenceSpec(seed=seed, num_steps=steps, block_size=probe.block_size)
        )
        num_gpu_blocks = sequence.spec.num_blocks * blocks_factor
        driver = BackendDriver(
            session, entry, DriveOptions(num_gpu_blocks=num_gpu_blocks, record_metadata=record)
        )
        driver.setup(sequence, region)
    except BackendUnavailable:
        raise
    except HarnessError as exc:
        raise BackendUnavailable(entry.name, "setting it up", str(exc)) from exc
    except Exception as exc:  # a tree the adapter does not model: say so, go on
        cause = raised_at(session.tree, exc)
        raise BackendUnavailable(entry.name, "setting it up", cause) from exc
    return driver.run(sequence, region), num_gpu_blocks


def run_summary(run: BackendRun) -> dict[str, Any]:
    """The run without its per-step metadata."""
    return {
        "backend": run.backend,
        "era": run.era.name,
        "builder": run.builder,
        "block_size": run.block_size,
        "reorder": run.reorder,
        "steps_run": len(run.steps),
        "error": None if run.error is None else asdict(run.error),
        "error_step": len(run.steps) - 1 if run.error is not None else None,
        "stubs_used": run.stubs_used,
        "notes": run.notes,
    }


def list_job(
    tree: VllmTree, options: PlatformOptions, names: list[str] | None, steps: int, seed: int
) -> list[dict[str, Any]]:
    entries = discover_backends(tree)
    chosen = entries if names is None else select_backends(entries, names)
    out: list[dict[str, Any]] = []
    with open_tree(tree, options) as session:
        for entry in chosen:
            row: dict[str, Any] = {"backend": entry.name, "class_path": entry.class_path}
            try:
                run, _ = _driven(session, entry, steps, seed, record=False)
            except BackendUnavailable as exc:
                row.update(status="stops", stage=exc.stage, cause=_cause(exc.cause))
            else:
                row.update(run_summary(run))
                row["status"] = "runs" if run.error is None else "stops"
                if run.error is not None:
                    row.update(stage=f"build at step {len(run.steps) - 1}", cause=_cause(run.error))
            out.append(row)
    return out


def _cause(cause: Any) -> str:
    return cause if isinstance(cause, str) else cause.describe()


def trace_job(
    tree: VllmTree,
    options: PlatformOptions,
    name: str,
    steps: int,
    seed: int,
    blocks_factor: int,
) -> dict[str, Any]:
    from harness.memory.allocation import Allocation
    from harness.memory.ledger import Ledger
    from harness.reference.engine import memory_tracker, tracking

    entry = select_backends(discover_backends(tree), [name])[0]
    ledger = Ledger()
    regions: dict[str, list[Allocation]] = {}

    @contextlib.contextmanager
    def region(label: str) -> Generator[None]:
        with ledger.region(label), ledger.recording() as recording:
            yield
        regions[label] = [e.allocation for e in recording.events if e.allocation is not None]

    with open_tree(tree, options) as session:
        try:
            with tracking(memory_tracker(ledger, "cpu")):
                run, num_gpu_blocks = _driven(
                    session,
                    entry,
                    steps,
                    seed,
                    blocks_factor=blocks_factor,
                    record=False,
                    region=region,
                )
        except BackendUnavailable as exc:
            raise HarnessError(str(exc)) from exc
    return {
        "run": run_summary(run),
        "num_gpu_blocks": num_gpu_blocks,
        "regions": {
            label: [_allocation(a, tree) for a in allocations]
            for label, allocations in regions.items()
        },
    }


def _allocation(allocation: Any, tree: VllmTree) -> dict[str, Any]:
    source = allocation.source
    return {
        "op": allocation.op,
        "nbytes": allocation.nbytes,
        "shape": list(allocation.shape),
        "source": None if source is None else f"{tree.relative(source.path)}:{source.line}",
        "line_text": "" if source is None else source.text,
    }


def record_job(
    tree: VllmTree, options: PlatformOptions, name: str, steps: int, seed: int
) -> dict[str, Any]:
    entry = select_backends(discover_backends(tree), [name])[0]
    with open_tree(tree, options) as session:
        try:
            run, _ = _driven(session, entry, steps, seed)
        except BackendUnavailable as exc:
            return {"unavailable": str(exc)}
    return {
        "run": run_summary(run),
        "steps": [
            {
                "index": s.index,
                "req_ids": s.req_ids,
                "swaps": [list(p) for p in s.swaps],
                "metadata": s.metadata,
                "error": None if s.error is None else asdict(s.error),
            }
            for s in run.steps
        ],
    }


def platform_options(values: dict[str, Any]) -> PlatformOptions:
    return PlatformOptions(
        device_capability=(
            int(values["device_capability"][0]),
            int(values["device_capability"][1]),
        ),
        flash_attn_version=values["flash_attn_version"],
        num_sms=values["num_sms"],
        flashinfer_trtllm=values["flashinfer_trtllm"],
    )


def run_job(job: dict[str, Any]) -> Any:
    """Dispatch one job (see the module docstring)."""
    tree = locate_tree(job["tree"])
    options = platform_options(job["platform"])
    kind = job["kind"]
    if kind == "list":
        return list_job(tree, options, job.get("backends"), job["steps"], job["seed"])
    if kind == "trace":
        return trace_job(
            tree, options, job["backend"], job["steps"], job["seed"], job["blocks_factor"]
        )
    if kind == "record":
        return record_job(tree, options, job["backend"], job["steps"], job["seed"])
    raise HarnessError(f"unknown adapter job {kind!r}")


def job(kind: str, tree: VllmTree, options: PlatformOptions, **fields: Any) -> dict[str, Any]:
    """A job for :func:`run_job` (JSON-ready)."""
    return {
        "kind": kind,
        "tree": str(tree.root),
        "platform": {
            "device_capability": list(options.device_capability),
            "flash_attn_version": options.flash_attn_version,
            "num_sms": options.num_sms,
            "flashinfer_trtllm": options.flashinfer_trtllm,
        },
        **fields,
    }
