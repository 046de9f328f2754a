"""``harness diff``: two vLLM trees' builders over the same serving sequence, step by step.

Each side runs in its own child process (:func:`~harness.adapter.jobs.run_job_in_child`); each
step's batch order, the reorder's swaps, every metadata field (FlashInfer's plans included) and
any exception (type, message, the tree's raising line) are compared. The first difference is reported with
its step, the field's path and both values. A crash on one side only is a difference; the same
crash on both sides (same type, message and line) is not. A backend the head removed is a
difference; one only the head has is said not to be compared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, cast

from harness.adapter.backends import discover_backends, select_backends
from harness.adapter.jobs import job, run_job_in_child
from harness.adapter.platform import PlatformOptions
from harness.errors import ChildError, HarnessError
from harness.vllm_tree.tree import VllmTree

MAX_SHOWN = 160


@dataclass(frozen=True, slots=True)
class Difference:
    """The first point where the two sides part."""

    step: int
    field: str
    base: str
    head: str

    def describe(self) -> str:
        return (
            f"first difference at step {self.step}, {self.field}:\n"
            f"      base: {self.base}\n      head: {self.head}"
        )


@dataclass
class BackendDiff:
    """One backend's comparison."""

    backend: str
    steps: int = 0
    difference: Difference | None = None
    not_run: str | None = None
    both_stopped: str | None = None
    """The exception both trees raised at the last step (same type, message and line)."""
    error: str | None = None
    """A side's child process was ended by the tree's code (``os._exit``, a crash, a thread's
    exception, past the time limit): this backend's comparison failed."""
    notes: list[str] = field(default_factory=list[str])

    def format(self) -> str:
        if self.error:
            return f"{self.backend}: ERROR: {self.error}"
        if self.not_run:
            return f"{self.backend}: not compared: {self.not_run}"
        if self.difference is None:
            stopped = (
                f"; both stop at step {self.steps - 1}: {self.both_stopped}"
                if self.both_stopped
                else ""
            )
            return f"{self.backend}: same over {self.steps} steps{stopped}"
        return f"{self.backend}: DIFFERENT: " + self.difference.describe()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def first_difference(base: object, head: object, path: str) -> tuple[str, Any, Any] | None:
    """The first path (depth first, keys in order) where ``base`` and ``head`` differ."""
    if isinstance(base, dict) and isinstance(head, dict):
        left = cast("dict[str, object]", base)
        right = cast("dict[str, object]", head)
        for key in list(left) + [k for k in right if k not in left]:
            if key not in left or key not in right:
                return f"{path}.{key}", left.get(key, "<absent>"), right.get(key, "<absent>")
            found = first_difference(left[key], right[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(base, list) and isinstance(head, list):
        xs = cast("list[object]", base)
        ys = cast("list[object]", head)
        if len(xs) != len(ys):
            return f"{path} (length)", len(xs), len(ys)
        for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    if (
        isinstance(base, float)
        and isinstance(head, float)
        and math.isnan(base)
        and math.isnan(head)
    ):
        return None  # both an uninitialised float (torch fills empty memory with NaN)
    if base == head:
        return None
    shown: tuple[str, Any, Any] = (path, cast("Any", base), cast("Any", head))
    return shown


def _error_text(error: dict[str, Any] | None) -> str:
    if error is None:
        return "no exception"
    return f"{error['type']}: {error['message']} (raised at {error['where'] or 'an unknown line'})"


def compare_records(backend: str, base: dict[str, Any], head: dict[str, Any]) -> BackendDiff:
    """The verdict from two ``record`` job results."""
    result = BackendDiff(backend)
    errors = [
        f"{side}: {r['error']}" for side, r in (("base", base), ("head", head)) if "error" in r
    ]
    if errors:
        result.error = "; ".join(errors)
        return result
    unavailable = (base.get("unavailable"), head.get("unavailable"))
    if unavailable[0] and unavailable[0] == unavailable[1]:
        result.not_run = f"both trees: {unavailable[0]}"
        return result
    if any(unavailable):
        result.difference = Difference(
            0, "set-up", unavailable[0] or "set up", unavailable[1] or "set up"
        )
        return result
    result.notes = sorted(set(base["run"]["notes"]) | set(head["run"]["notes"]))
    for b, h in zip(base["steps"], head["steps"], strict=False):
        result.steps = b["index"] + 1
        for name in ("error", "req_ids", "swaps", "metadata"):
            if name == "error":
                if b["error"] != h["error"]:
                    result.difference = Difference(
                        b["index"], "exception", _error_text(b["error"]), _error_text(h["error"])
                    )
                    return result
                continue
            found = first_difference(b[name], h[name], name)
            if found:
                where, x, y = found
                result.difference = Difference(b["index"], where, _short(x), _short(y))
                return result
    last = base["steps"][-1]["error"] if base["steps"] else None
    if last is not None:
        result.both_stopped = _error_text(last)
    if len(base["steps"]) != len(head["steps"]):
        result.difference = Difference(
            min(len(base["steps"]), len(head["steps"])),
            "steps run",
            str(len(base["steps"])),
            str(len(head["steps"])),
        )
    return result


def diff_backend(
    base: VllmTree,
    head: VllmTree,
    backend: str,
    options: PlatformOptions,
    steps: int,
    seed: int = 0,
) -> BackendDiff:
    """Run ``backend`` on both trees over one sequence and compare (module docstring)."""
    records: list[dict[str, Any]] = []
    for side, tree in (("base", base), ("head", head)):
        work = job("record", tree, options, backend=backend, steps=steps, seed=seed)
        try:
            records.append(run_job_in_child(work, f"{backend} on the {side} tree"))
        except HarnessError as exc:
            records.append({"unavailable": str(exc)})
        except ChildError as exc:
            records.append({"error": str(exc)})
    return compare_records(backend, records[0], records[1])


def diff_trees(
    base: VllmTree,
    head: VllmTree,
    names: list[str] | None,
    options: PlatformOptions,
    steps: int,
    seed: int = 0,
) -> list[BackendDiff]:
    """Each backend ``names`` gives (default: those of issue 26 that either tree has), compared
    where both trees have it (module docstring)."""
    in_base = {e.name for e in discover_backends(base)}
    in_head = {e.name for e in discover_backends(head)}
    entries = discover_backends(base)
    entries += [e for e in discover_backends(head) if e.name not in in_base]
    results: list[BackendDiff] = []
    for entry in select_backends(entries, names, "the base and head trees"):
        name = entry.name
        if name not in in_head:
            missing = f"{head.label} has no backend {name}"
            results.append(BackendDiff(name, difference=Difference(0, "set-up", "set up", missing)))
        elif name not in in_base:
            only = f"only {head.label} has it: there is no base to compare with"
            results.append(BackendDiff(name, not_run=only))
        else:
            results.append(diff_backend(base, head, name, options, steps, seed))
    return results
