"""``attn-metadata-harness[gpu,eval]`` resolves with each vLLM release's pins (pip ``--dry-run``).

A real resolution against the package index (integration tier: the network). Nothing is
installed: ``pip install --dry-run --ignore-installed --report`` only reads metadata. A pin
whose constraints line says :data:`ABSENT` is not on the index; the test checks that it is
still absent (so the mark cannot go stale) and resolves the rest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ABSENT = "# absent from the package index"
"""How a constraints line says that the package index does not hold its pin."""


def _split(path: Path) -> tuple[list[str], list[str]]:
    """(the pins to resolve, the pins marked absent) of a constraints file."""
    present: list[str] = []
    absent: list[str] = []
    for line in path.read_text().splitlines():
        pin = line.partition("#")[0].strip()
        if pin:
            (absent if ABSENT in line else present).append(pin)
    return present, absent


def _pip(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PIP_NO_INDEX"}
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=900,
    )


def test_the_absent_mark_parses() -> None:
    present, absent = _split(ROOT / "ci/constraints-vllm-0.34.0.txt")
    assert absent == ["flashinfer-python==0.7.3"]
    assert "torch==2.14.0" in present and "vllm==0.34.0" in present


@pytest.mark.integration
@pytest.mark.parametrize("version", ["0.9.0", "0.34.0"])
def test_the_gpu_and_eval_extras_resolve_with_vllms_pins(tmp_path: Path, version: str) -> None:
    present, absent = _split(ROOT / f"ci/constraints-vllm-{version}.txt")
    src = tmp_path / "src"  # resolve from a copy: pip would write build/ into the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "harness", src / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("\n".join(p for p in present if not p.startswith("vllm==")) + "\n")
    report = tmp_path / "report.json"
    done = _pip(
        *("install", "--dry-run", "--ignore-installed", "--report", str(report)),
        *("-c", str(constraints), ".[gpu,eval]"),
        cwd=src,
    )
    if done.returncode != 0 and "No matching distribution" not in done.stderr:
        lines = done.stderr.strip().splitlines() or [f"pip exited {done.returncode}"]
        if any(s in done.stderr for s in ("NewConnectionError", "Network is unreachable")):
            pytest.skip(f"the package index is not reachable: {lines[-1]}")
    assert done.returncode == 0, done.stderr[-3000:]
    chosen = {
        item["metadata"]["name"].lower().replace("_", "-"): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    for pin in present:
        name, _, wanted = pin.partition("==")
        if name in chosen:  # constraints on what [gpu,eval] does not pull are not resolved
            assert chosen[name] == wanted, f"{name}: {chosen[name]} resolved, vLLM pins {wanted}"
    assert chosen["torch"] == dict(p.split("==") for p in present)["torch"]
    assert chosen["attn-metadata-harness"] == "0.1.0"
    for pin in absent:  # still not on the index: the mark is true, and said in the report
        name, _, wanted = pin.partition("==")
        found = _pip("index", "versions", name, cwd=tmp_path)
        assert found.returncode == 0, found.stderr[-2000:]
        (listing,) = [x for x in found.stdout.splitlines() if x.startswith("Available versions:")]
        versions = listing.removeprefix("Available versions:").replace(" ", "").split(",")
        assert wanted not in versions, f"{pin} is on the index now: drop its mark in the file"
