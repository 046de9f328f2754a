"""The text report: one row per differential, then every disagreement and error in full."""

from __future__ import annotations

from harness.fidelity.source import PINNED_VLLM_VERSION
from harness.fidelity.suite import FidelityReport


def format_report(report: FidelityReport) -> str:
    """The table of differentials (agreed/trials) and the details of what did not agree."""
    source = report.source
    lines = [
        f"harness fidelity: the reference vs vLLM {source.version} ({source.root}), seed {report.seed}"
    ]
    if source.version != PINNED_VLLM_VERSION:
        lines.append(
            f"note: the reference follows vLLM {PINNED_VLLM_VERSION}; against {source.version} "
            "disagreements may be vLLM's changes"
        )
    width = max(len(r.name) for r in report.results) if report.results else 12
    lines.append(f"{'differential':<{width}}  {'agreed/trials':>13}  {'time':>6}  verdict")
    for r in report.results:
        verdict = "agree" if r.ok else ("ERROR" if r.error else "DISAGREE")
        lines.append(
            f"{r.name:<{width}}  {f'{r.agreed}/{r.trials}':>13}  {r.seconds:>5.1f}s  {verdict}"
        )
    for r in report.results:
        if r.ok:
            continue
        lines += ["", f"{r.name} -- {r.description}", f"  vLLM code: {r.vllm_code}"]
        if r.error is not None:
            lines.append(f"  ERROR (the differential could not compare): {r.error}")
            continue
        if r.disagreement is not None:
            d = r.disagreement
            lines += [
                f"  minimal disagreeing input (shrunk in {d.shrink_steps} steps): {d.input}",
                f"  first difference: {d.difference}",
            ]
    total = sum(r.trials for r in report.results)
    agreed = sum(r.agreed for r in report.results)
    failing = [r.name for r in report.results if not r.ok]
    lines.append("")
    if report.ok:
        n = len(report.results)
        lines.append(f"every differential agrees ({n} of {n}; {agreed}/{total} trials)")
    else:
        lines.append(f"NOT in agreement: {', '.join(failing)} ({agreed}/{total} trials agreed)")
    return "\n".join(lines)
