"""``harness demo``: run a small named scenario through the reference runner and check the oracle.

For every step it prints, per KV cache group, each request's block-table row and slots and a
summary of the metadata the group's builder built; then it says whether paged attention through
that metadata matched a dense forward of every request. Exit 0 when it did, 1 when it did not.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the heavy imports (torch) wait until the command runs
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from harness.reference.backends.abstract import AttentionBackend
    from harness.reference.scenarios import GroupRecord, ScenarioResult, StepRecord

MAX_VALUE_CHARS = 48


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:  # pyright: ignore[reportPrivateUsage]
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo",
        help="run a small scenario through the reference runner and check the oracle",
        description=__doc__,
    )
    parser.add_argument(
        "--scenario",
        default=None,
        help="a named scenario (an unknown name lists them; default: a hybrid full + "
        "sliding-window model through prefill and decode)",
    )
    parser.add_argument(
        "--backend",
        default=None,
        help="attention backend for every group, e.g. FLASH_ATTN or FLASHINFER "
        "(an unknown name lists them; default: the scenario's)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from harness.reference.backends import get_attn_backend
    from harness.reference.scenarios import DEFAULT_SCENARIO, get_scenario

    scenario = get_scenario(args.scenario or DEFAULT_SCENARIO)
    if args.backend is not None:
        get_attn_backend(args.backend)  # an unknown name fails here, listing the known ones
    return demo(scenario.name, args.backend, Console())


def demo(
    scenario_name: str, attn_backend: str | type[AttentionBackend] | None, console: Console
) -> int:
    """Run, print and judge one scenario; 0 if the oracle agreed on every step, else 1."""
    import torch

    from harness.reference.scenarios import get_scenario, run_scenario

    torch.set_num_threads(1)  # tiny matrices: threads only add overhead
    scenario = get_scenario(scenario_name)
    result = run_scenario(scenario, attn_backend)
    backend_name = (
        attn_backend
        if isinstance(attn_backend, str) or attn_backend is None
        else attn_backend.__name__
    ) or scenario.backend
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
    import numpy as np
    from rich.table import Table

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
    from rich.text import Text

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
    from harness.reference.scenarios import ORACLE_TOLERANCE

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
