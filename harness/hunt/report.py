"""The hunt's outputs: the console table, ``hunt.md``, ``hunt.json`` and the memory plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from harness.hunt.job import HuntReport

MAX_DETAIL = 110


def summary_table(report: HuntReport) -> Table:
    """One row per check: section, check, verdict (expected), seconds, detail."""
    table = Table(title=f"harness hunt: {report.path}", title_justify="left")
    for column in ("section", "check", "verdict", "s", "detail"):
        table.add_column(column, justify="right" if column == "s" else "left", overflow="fold")
    for row in report.rows:
        style = (
            "bold red" if row.misbehaves or row.crash else ("dim" if row.expected is None else "")
        )
        verdict = row.verdict + ("" if row.expected is None else f" (want {row.expected})")
        detail = row.detail if len(row.detail) <= MAX_DETAIL else row.detail[: MAX_DETAIL - 1] + "…"
        table.add_row(row.section, row.name, verdict, f"{row.seconds:.1f}", detail, style=style)
    return table


def verdict_line(report: HuntReport) -> str:
    bad = [r for r in report.rows if r.misbehaves]
    if report.ok:
        return f"OK: {len(report.rows)} checks behaved as expected in {report.seconds:.0f} s"
    parts: list[str] = []
    crashed = [r.name for r in report.rows if r.crash]
    if crashed:
        parts.append(f"proven crash(es) in {', '.join(crashed)}")
    if bad:
        parts.append(
            f"{len(bad)} check(s) misbehaved: " + ", ".join(f"{r.section} {r.name}" for r in bad)
        )
    return "FAILED: " + "; ".join(parts)


def write_reports(report: HuntReport, out_dir: Path) -> list[Path]:
    """Write ``hunt.json``, ``hunt.md`` and one memory plot per simulated device run."""
    from harness.simulation.plot import plot_simulation

    out_dir.mkdir(parents=True, exist_ok=True)
    plots: dict[str, Path] = {}
    for key, result in report.simulations.items():
        label, _, device = key.partition("@")
        plots[key] = plot_simulation(result, out_dir / f"hunt-memory-{label}-{device}.png")
    json_path = out_dir / "hunt.json"
    json_path.write_text(json.dumps(to_dict(report, plots), indent=2) + "\n")
    md_path = out_dir / "hunt.md"
    md_path.write_text(to_markdown(report, plots))
    return [md_path, json_path, *plots.values()]


def to_dict(report: HuntReport, plots: dict[str, Path]) -> dict[str, Any]:
    return {
        "path": report.path,
        "ok": report.ok,
        "crash": report.crash,
        "devices": list(report.devices),
        "seconds": round(report.seconds, 3),
        "rows": [r.to_dict() for r in report.rows],
        "catalog": [r.to_dict() for r in report.catalog],
        "simulations": {
            key: {
                "completed": result.completed,
                "num_blocks": None if result.sizing is None else result.sizing.num_blocks,
                "steps": len(result.steps),
                "peak_bytes": result.peak_bytes,
                "oom_step": result.oom_step,
                "oom": None if result.oom is None else str(result.oom).splitlines()[0],
                "plot": str(plots[key]) if key in plots else None,
            }
            for key, result in report.simulations.items()
        },
    }


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: HuntReport, plots: dict[str, Path]) -> str:
    from harness.regressions import REGRESSIONS

    lines = [
        "# harness hunt",
        "",
        f"Tree checked: `{report.path}`; devices: {', '.join(report.devices)}; "
        f"{report.seconds:.0f} s.",
        "",
        f"**{verdict_line(report)}**",
        "",
        "| section | check | verdict | expected | seconds | detail |",
        "| --- | --- | --- | --- | ---: | --- |",
    ]
    for r in report.rows:
        verdict = f"**{r.verdict}**" if r.misbehaves else r.verdict
        lines.append(
            f"| {r.section} | {_cell(r.name)} | {verdict} | {r.expected or 'reported'} | "
            f"{r.seconds:.1f} | {_cell(r.detail)} |"
        )
    lines += [
        "",
        "## Catalog",
        "",
        "| id | upstream | bug class | checks (fail on buggy, pass on fixed) | seconds |",
        "| --- | --- | --- | --- | ---: |",
    ]
    for result in report.catalog:
        entry = REGRESSIONS[result.id]
        refs = ", ".join(f"[{u.kind} #{u.number}]({u.url}) ({u.role})" for u in entry.upstream)
        checks = ", ".join(c.name for c in entry.checks)
        lines.append(
            f"| {result.id} | {refs} | {_cell(entry.bug_class)} | {checks} | {result.seconds:.1f} |"
        )
    if plots:
        lines += ["", "## Memory", ""]
        for key, path in plots.items():
            lines += [f"![{key}]({path.name})", ""]
    return "\n".join(lines) + "\n"
