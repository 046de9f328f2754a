"""``harness hunt --vllm-src PATH``: the rows a vLLM tree adds to the hunt's table and reports.

One ``overrides`` row (the static checker over the tree's ``vllm`` package, with the tree's own
configuration) and one ``scaling`` row per backend (:func:`harness.adapter.scaling.tree_scaling`):
``pass`` when only the KV cache grows with ``num_blocks``, ``FAIL`` naming the first site,
``n/a`` for a backend the adapter cannot drive through the whole sequence (what stops it is said;
not judged), ``error`` when the run itself broke or the tree's code ended it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from harness.vllm_tree.tree import VllmTree

if TYPE_CHECKING:
    from harness.hunt.job import Row

QUICK_STEPS = 20
STEPS = 200


def tree_rows(
    tree: VllmTree,
    *,
    quick: bool,
    overrides_row: Callable[[], Row],
    say: Callable[[str], None],
) -> list[Row]:
    """The tree's rows (module docstring); ``overrides_row`` runs the hunt's own checker row."""
    from harness.adapter.backends import discover_backends, select_backends
    from harness.adapter.platform import PlatformOptions
    from harness.adapter.scaling import tree_scaling
    from harness.hunt.job import Row

    label = f"vLLM {tree.version}" if tree.version else str(tree.root)
    say(f"overrides {tree.root / 'vllm'}")
    rows = [overrides_row()]
    for entry in select_backends(discover_backends(tree), None):
        say(f"scaling: {label} {entry.name}")
        started = time.perf_counter()
        name = f"{label} {entry.name}"
        try:
            result = tree_scaling(
                tree, entry.name, PlatformOptions(), QUICK_STEPS if quick else STEPS
            )
        except Exception as exc:  # the run broke (not the tree's builder): an error row
            rows.append(
                Row("scaling", name, "error", None, str(exc), time.perf_counter() - started)
            )
            continue
        seconds = time.perf_counter() - started
        if result.error is not None:
            detail = result.error.replace("\n", " ")
            rows.append(Row("scaling", name, "error", None, detail, seconds))
        elif result.findings:
            first = result.findings[0].describe().replace("\n", " ")
            detail = f"{len(result.findings)} site(s) grow with num_blocks; {first}"
            rows.append(Row("scaling", name, "FAIL", "pass", detail, seconds))
        elif result.complete:
            detail = f"only the KV cache scales ({result.steps} steps of the tree's builder)"
            rows.append(Row("scaling", name, "pass", "pass", detail, seconds))
        else:
            where = f"after {result.steps} step(s)" if result.steps else "before any step"
            detail = f"not covered: stopped {where}: {result.stopped}"
            rows.append(Row("scaling", name, "n/a", None, detail, seconds))
    return rows
