"""What ``harness demo`` prints: per step and KV cache group, each request's block-table row and
slots and a summary of the metadata its builder built; then the oracle's verdict."""

from __future__ import annotations

import numpy as np
import torch
from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness.reference.backends.abstract import AttentionBackend
from harness.reference.scenarios import (
    ORACLE_TOLERANCE,
    GroupRecord,
    ScenarioResult,
    StepRecord,
    get_scenario,
    run_scenario,
)

MAX_VALUE_CHARS = 48


def demo(
    scenario_name: str, attn_backend: str | type[AttentionBackend] | None, console: Console
) -> int:
    """Run, print and judge one scenario; 0 if the oracle agreed on every step, else 1."""
    torch.set_num_threads(1)  # tiny matrices: threads only add overhead
    scenario = get_scenario(scenario_name)
    result = run_scenario(scenario, attn_backend)
    backend_name = getattr(attn_backend, "__name__", attn_backend) or scenario.backend
    console.print(
        f"[bold]{scenario.name}[/bold]: {scenario.description}\n"
        f"model {scenario.model_config.name} ({scenario.model_config.num_hidden_layers} layers), "
        f"backend {backend_name}, block size {scenario.block_size}, "
        f"{scenario.num_gpu_blocks} blocks, {len(result.steps)} steps, "
        f"{result.num_preemptions} preemptions"
    )
    for step in result.steps:
        for group in step.groups:
            console.print(_group_table(step, group))
    return _verdict(result, console)


def _group_table(step: StepRecord, group: GroupRecord) -> Table:
    table = Table(
        title=f"step {step.step} · group {group.group_id} ({group.kv_cache_spec}, "
        f"block size {group.block_size}, {len(group.layer_names)} layers)",
        title_justify="left",
        caption=_metadata_line(group),
        caption_justify="left",
    )
    for column in ("request", "computed", "scheduled", "block table row", "slot mapping"):
        table.add_column(column, justify="right" if column in ("computed", "scheduled") else "left")
    ends = np.cumsum(step.num_scheduled_tokens).tolist()
    starts = [0, *ends[:-1]]
    for i, req_id in enumerate(step.req_ids):
        table.add_row(
            req_id,
            str(step.num_computed_tokens[i]),
            str(step.num_scheduled_tokens[i]),
            str(group.block_table[i]),
            str(group.slot_mapping[starts[i] : ends[i]]),
        )
    return table


def _metadata_line(group: GroupRecord) -> Text:
    parts: list[str] = []
    for key, value in group.metadata.items():
        if key in ("type", "slot_mapping") or value is None:
            continue
        shown = str(value)
        if len(shown) > MAX_VALUE_CHARS:
            shown = shown[: MAX_VALUE_CHARS - 3] + "..."
        parts.append(f"{key}={shown}")
    return Text(f"{group.metadata['type']}: " + "  ".join(parts), style="dim")


def _verdict(result: ScenarioResult, console: Console) -> int:
    tolerance = f"atol={ORACLE_TOLERANCE['atol']:g}, rtol={ORACLE_TOLERANCE['rtol']:g}"
    if result.oracle_ok:
        console.print(
            f"[green]oracle: OK[/green] paged attention == dense attention within {tolerance} "
            f"on all {len(result.steps)} steps (max |err| = {result.max_abs_err:.2e})"
        )
        return 0
    bad = [s.step for s in result.steps if not s.oracle_ok]
    console.print(
        f"[red]oracle: MISMATCH[/red] paged attention != dense attention ({tolerance}) "
        f"at steps {bad} (max |err| = {result.max_abs_err:.2e})"
    )
    return 1
