"""How a tree's runner orders the batch before building: each era's own code, swaps recorded.

* vLLM 0.10 on, the runner under ``vllm/v1/worker/gpu/`` (0.34): every step the batch is
  ``sort_batch_req_ids(...)`` of the scheduled requests (decodes first), run from the tree's own
  source; the persistent batch is permuted into that order.
* A tree whose attention utils define ``reorder_batch_to_split_decodes_and_prefills`` (the V1
  ``gpu_model_runner`` of vLLM 0.10-0.1x): that function, with the builder's
  ``reorder_batch_threshold``.
* vLLM 0.9: the builder's own ``reorder_batch(input_batch, scheduler_output)``, which the runner
  calls on the first KV cache group's builder.

Each swap of two rows (``swap_states``) is recorded by the batch: ``harness diff`` compares them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.adapter.batch import PersistentBatch
from harness.adapter.session import TreeSession
from harness.reference.outputs import SchedulerOutput
from harness.vllm_tree.extract import extract_definitions

V2_RUNNER = "vllm/v1/worker/gpu/model_runner.py"
Reorder = Callable[[PersistentBatch, SchedulerOutput], list[tuple[int, int]]]


def _into_order(batch: PersistentBatch, order: list[str]) -> None:
    input_batch = batch.input_batch
    for i, req_id in enumerate(order):
        j = input_batch.req_id_to_index[req_id]
        if j != i:
            input_batch.swap_states(i, j)


def reorder_for(session: TreeSession, builder: Any) -> tuple[str, Reorder]:
    """The tree's reorder (module docstring) for ``builder``, and a line saying which it is."""
    runner = session.tree.file(V2_RUNNER)
    namespace: dict[str, Any] = {}
    if runner.is_file() and not extract_definitions(
        runner, ["sort_batch_req_ids"], namespace, required=False
    ):
        sort = namespace["sort_batch_req_ids"]

        def sorted_batch(batch: PersistentBatch, output: SchedulerOutput) -> list[tuple[int, int]]:
            _into_order(batch, sort(dict(output.num_scheduled_tokens), {}, 1))
            return list(batch.swaps)

        return f"sort_batch_req_ids ({V2_RUNNER})", sorted_batch
    if hasattr(builder, "reorder_batch"):

        def by_builder(batch: PersistentBatch, output: SchedulerOutput) -> list[tuple[int, int]]:
            builder.reorder_batch(batch.input_batch, output)
            return list(batch.swaps)

        return f"{type(builder).__name__}.reorder_batch", by_builder
    utils = "vllm.v1.attention.backends.utils"
    split = None
    if session.loader.is_module(utils):
        split = getattr(session.module(utils), "reorder_batch_to_split_decodes_and_prefills", None)
    threshold = getattr(builder, "reorder_batch_threshold", None)
    if callable(split) and threshold is not None:

        def by_threshold(batch: PersistentBatch, output: SchedulerOutput) -> list[tuple[int, int]]:
            split(batch.input_batch, output, decode_threshold=threshold)
            return list(batch.swaps)

        return "reorder_batch_to_split_decodes_and_prefills", by_threshold
    return "none (the builder keeps the batch order)", lambda batch, output: []
