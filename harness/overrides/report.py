"""Output formats: text, json, sarif (2.1.0, GitHub code scanning) and github annotations."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from harness import __version__
from harness.overrides.findings import Finding

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render(findings: Sequence[Finding], fmt: str) -> str:
    """All findings in one format (a trailing newline included when non-empty)."""
    if fmt == "json":
        return json.dumps([f.to_json() for f in findings], indent=2) + "\n"
    if fmt == "sarif":
        return json.dumps(sarif(findings), indent=2) + "\n"
    if fmt == "github":
        return "".join(github(f) + "\n" for f in findings)
    return "".join(text(f) + "\n" for f in findings)


def one_line(value: str) -> str:
    """``value`` with control characters and line or paragraph separators escaped (``\\n``,
    ``\\u2028``): text from the scanned tree cannot start a forged line nor steer a terminal."""
    if value.isprintable():
        return value
    return "".join(
        ascii(c)[1:-1] if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in value
    )


def text(finding: Finding) -> str:
    """``path:line:col: CODE symbol message`` plus both signatures and the evidence, each
    line written with :func:`one_line`."""
    head = f"{finding.path}:{finding.line}:{finding.col}: {finding.code} {finding.symbol} {finding.message}"
    lines = [head, f"    severity: {finding.severity.value}"]
    if finding.signature is not None:
        lines.append(f"    override: {finding.signature}")
    if finding.base_signature is not None:
        lines.append(
            f"    base:     {finding.base_signature}  ({finding.base_path}:{finding.base_line})"
        )
    if finding.evidence is not None:
        ev = finding.evidence
        lines += [f"    call:     {ev.path}:{ev.line}: {ev.text}", f"    raises:   {ev.error}"]
        if ev.guards:
            lines.append(f"    reached only if {' and '.join(ev.guards)}")
    return "\n".join(one_line(line) for line in lines)


def _escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def github(finding: Finding) -> str:
    """A GitHub Actions workflow command (``::error file=...::message``)."""
    title = _escape_property(f"{finding.code} {finding.symbol}")
    props = (
        f"file={_escape_property(finding.path)},line={finding.line},col={finding.col},title={title}"
    )
    body = finding.message
    if finding.signature and finding.base_signature:
        body += f"\noverride: {finding.signature}\nbase:     {finding.base_signature}"
    return f"::{finding.severity.value} {props}::{_escape_data(body)}"


def artifact_location(path: str) -> dict[str, str]:
    """A SARIF ``artifactLocation``: an RFC 3986 URI reference of the path's bytes (non-UTF-8 names
    included), percent-encoded but for ``/``, relative to ``%SRCROOT%`` unless absolute."""
    encoded = quote(path.encode("utf-8", "surrogateescape"), safe="/")
    if path.startswith("/"):
        return {"uri": f"file://{encoded}"}
    return {"uri": encoded, "uriBaseId": "%SRCROOT%"}


def _location(
    path: str, line: int, col: int | None = None, message: str | None = None
) -> dict[str, Any]:
    region: dict[str, Any] = {"startLine": max(line, 1)}
    if col is not None:
        region["startColumn"] = max(col, 1)
    location: dict[str, Any] = {
        "physicalLocation": {"artifactLocation": artifact_location(path), "region": region}
    }
    if message is not None:
        location["message"] = {"text": message}
    return location


def sarif(findings: Sequence[Finding]) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run."""
    from harness.overrides.rules import RULES  # rule docs are only needed here

    rule_ids = list(RULES)
    rules = [
        {
            "id": rule.code,
            "name": rule.symbol,
            "shortDescription": {"text": rule.description},
            "fullDescription": {"text": rule.doc.split("\n\n")[1]},  # "## What it does"
            "help": {"text": rule.doc, "markdown": rule.doc},
            "defaultConfiguration": {"level": "warning"},
        }
        for rule in RULES.values()
    ]
    results: list[dict[str, Any]] = []
    for finding in findings:
        related: list[dict[str, Any]] = []
        if finding.base_path is not None and finding.base_line is not None:
            base = f"base: {finding.base_signature}"
            related.append(_location(finding.base_path, finding.base_line, message=base))
        if finding.evidence is not None:
            ev = finding.evidence
            related.append(_location(ev.path, ev.line, ev.col, f"call: {ev.text} -> {ev.error}"))
        for i, loc in enumerate(related):
            loc["id"] = i + 1
        result: dict[str, Any] = {
            "ruleId": finding.code,
            "ruleIndex": rule_ids.index(finding.code),
            "level": finding.severity.value,
            "message": {"text": finding.message},
            "locations": [_location(finding.path, finding.line, finding.col)],
        }
        if related:
            result["relatedLocations"] = related
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "harness-overrides",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {
                    "%SRCROOT%": {"description": {"text": "The working directory of the run."}}
                },
                "results": results,
            }
        ],
    }


def list_rules() -> str:
    """One line per rule: code, symbol, default state, description."""
    from harness.overrides.rules import RULES

    return "".join(
        f"{r.code}  {r.symbol:<28} {'on' if r.enabled_by_default else 'off':<3}  {r.description}\n"
        for r in RULES.values()
    )
