"""The text report: one row per differential, the named deviations, then every failure in full."""

from __future__ import annotations

from harness.fidelity.differential import DifferentialResult
from harness.fidelity.suite import FidelityReport
from harness.vllm_tree.fetch import PINNED_VLLM_VERSION


def verdict(result: DifferentialResult) -> str:
    """One word or two for the table."""
    if result.error is not None:
        return "ERROR"
    if result.unlisted:
        return "UNLISTED DEVIATION"
    if not result.compared:
        return "named deviation (not compared)"
    if not result.ok:
        return "DISAGREE"
    if result.deviations:
        n = len(result.deviations)
        return f"agree beyond {n} named deviation{'s' if n > 1 else ''}"
    return "agree"


def _deviation_lines(result: DifferentialResult) -> list[str]:
    lines: list[str] = []
    for found in result.deviations:
        if found.deviation.paths is None:
            effect = "nothing left to compare"
        elif not found.deviation.paths:
            effect = "a setting: compared as the reference runs"
        else:
            count = result.explained.get(found.deviation.name, 0)
            effect = f"explained a difference in {count} of {result.trials} trials"
        listed = "" if found.listed else " -- NOT LISTED in docs/fidelity.md for this version"
        lines.append(f"  {found.describe()} ({effect}){listed}")
    return lines


def format_report(report: FidelityReport) -> str:
    """The table of differentials, the named deviations, and the details of what failed."""
    tree = report.tree
    lines = [
        f"harness fidelity: the reference vs vLLM {tree.version} ({tree.root}), seed {report.seed}"
    ]
    if tree.version != PINNED_VLLM_VERSION:
        lines.append(
            f"note: the reference follows vLLM {PINNED_VLLM_VERSION}; a later vLLM's changes are "
            "named deviations where docs/fidelity.md lists them, disagreements otherwise"
        )
    width = max(len(r.name) for r in report.results) if report.results else 12
    lines.append(f"{'differential':<{width}}  {'agreed/trials':>13}  {'time':>6}  verdict")
    for r in report.results:
        counts = f"{r.agreed}/{r.trials}" if r.compared else "-"
        lines.append(f"{r.name:<{width}}  {counts:>13}  {r.seconds:>5.1f}s  {verdict(r)}")
    deviating = [r for r in report.results if r.deviations]
    if deviating:
        lines += ["", f"named deviations of vLLM {tree.version} (docs/fidelity.md):"]
        for r in deviating:
            lines += _deviation_lines(r)
    for r in report.results:
        if r.ok:
            continue
        lines += ["", f"{r.name} -- {r.description}", f"  vLLM code: {r.vllm_code}"]
        if r.modules:
            lines.append(f"  loaded from: {', '.join(r.modules)}")
        for found in r.unlisted:
            lines.append(
                f"  UNLISTED: {found.key} ({found.location}): docs/fidelity.md does not list it "
                f"for vLLM {tree.version}; review the change, then list it there (and in "
                "harness.fidelity.deviation.LISTED) or make the reference follow it"
            )
        if r.error is not None:
            lines.append(f"  ERROR (the differential could not compare): {r.error}")
            continue
        if r.disagreement is not None:
            d = r.disagreement
            lines += [
                f"  minimal disagreeing input (shrunk in {d.shrink_steps} steps): {d.input}",
                f"  first difference beyond the named deviations: {d.difference}"
                if r.deviations
                else f"  first difference: {d.difference}",
            ]
    total = sum(r.trials for r in report.results)
    agreed = sum(r.agreed for r in report.results)
    failing = [r.name for r in report.results if not r.ok]
    lines.append("")
    n = len(report.results)
    if report.ok and not deviating:
        lines.append(f"every differential agrees ({n} of {n}; {agreed}/{total} trials)")
    elif report.ok:
        lines.append(
            f"every differential agrees or deviates only as docs/fidelity.md lists for vLLM "
            f"{tree.version} ({n - len(deviating)} agree, {len(deviating)} with named "
            f"deviations; {agreed}/{total} trials agreed beyond them)"
        )
    else:
        lines.append(f"NOT in agreement: {', '.join(failing)} ({agreed}/{total} trials agreed)")
    return "\n".join(lines)
