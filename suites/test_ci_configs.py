"""The CI configs parse, pin actions by SHA, keep permissions read-only and call make/.ci/run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml  # PyYAML: a dependency of pre-commit (dev extra)

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github/workflows").glob("*.yml"))


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), path
    return data


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_is_pinned_and_read_only(path: Path) -> None:
    workflow = _load(path)
    assert workflow["permissions"] == {"contents": "read"}
    assert workflow["concurrency"]["cancel-in-progress"] is True
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            uses = step.get("uses")
            if uses is None:
                continue
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", uses), f"unpinned action {uses}"
            if uses.startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


def test_ci_run_calls_make_test() -> None:
    script = (ROOT / ".ci/run").read_text()
    assert "make test" in script
    assert "-eq 5" in script


def test_buildkite_steps_use_make_and_gpu_is_optional() -> None:
    pipeline = _load(ROOT / "ci/pipeline.yml")
    for step in pipeline["steps"]:
        assert step["command"].startswith(("make ", "bash .ci/run")), step["label"]
        assert step["source_file_dependencies"], step["label"]
        if step["agents"]["queue"] == "gpu":
            assert step["soft_fail"] is True


def test_every_make_target_has_help() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = re.findall(r"^([a-z][\w-]*):", makefile, flags=re.M)
    documented = set(re.findall(r"^([a-z][\w-]*):.*## ", makefile, flags=re.M))
    assert set(targets) == documented
    for required in ("install", "run", "test", "test-gpu", "lint", "typecheck", "help"):
        assert required in documented
