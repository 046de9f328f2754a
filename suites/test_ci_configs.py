"""The CI configs are valid, do what their names say, and reference only what exists.

GitHub workflows and the Buildkite pipeline are validated against the JSON schemas check-jsonschema
vendors (actionlint has no wheel on the package index: its PyPI package is a source distribution
that downloads the binary from GitHub while building). The rest are structural checks: actions
pinned by SHA, read-only permissions except the one SARIF upload job, the reusable workflow's
inputs all used, every make target and script a config names exists, and path filtering that runs
what a change needs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github/workflows").glob("*.yml"))
PIPELINE = ROOT / "ci/pipeline.yml"
VLLM_STEPS = ROOT / "ci/vllm/test_areas/harness.yaml"
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), path
    return data


def _triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert isinstance(on, dict)
    return on


def _steps(workflow: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            yield name, step


def _commands() -> Iterator[tuple[str, str]]:
    """(where, shell text) for every command the workflows and the pipeline run."""
    for path in WORKFLOWS:
        for job, step in _steps(_load(path)):
            if "run" in step:
                yield f"{path.name}:{job}", step["run"]
    for step in _load(PIPELINE)["steps"]:
        yield f"pipeline.yml:{step['label']}", step["command"]
    for step in _load(VLLM_STEPS)["steps"]:
        yield f"vllm/test_areas/harness.yaml:{step['key']}", "\n".join(step["commands"])
    yield "ci/upload.sh", (ROOT / "ci/upload.sh").read_text()
    yield "ci/overrides_since.sh", (ROOT / "ci/overrides_since.sh").read_text()
    yield ".ci/run", (ROOT / ".ci/run").read_text()


def _make_rules() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), flags=re.M))


# --- schema validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "paths"),
    [("vendor.github-workflows", WORKFLOWS), ("vendor.buildkite", [PIPELINE])],
    ids=["github-workflows", "buildkite"],
)
def test_configs_match_their_published_schemas(schema: str, paths: list[Path]) -> None:
    out = subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", schema, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_schema_check_bites(tmp_path: Path) -> None:
    # The key the old pipeline used, which nothing read, is not a Buildkite field.
    bad = tmp_path / "pipeline.yml"
    bad.write_text("steps:\n  - command: make test\n    source_file_dependencies: [harness/]\n")
    out = subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.buildkite", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1


# --- GitHub Actions ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_is_pinned_and_read_only(path: Path) -> None:
    workflow = _load(path)
    assert workflow["permissions"] == {"contents": "read"}
    if set(_triggers(workflow)) != {"workflow_call"}:  # a called workflow runs in its caller's
        assert workflow["concurrency"]["cancel-in-progress"] is True
    for _, step in _steps(workflow):
        uses = step.get("uses")
        if uses is None:
            continue
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses), f"unpinned action {uses}"
        if uses.startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False
    for line in path.read_text().splitlines():
        if re.search(r"uses: [\w.-]+/[\w./-]+@[0-9a-f]{40}", line):
            assert re.search(r"# v\d+\.\d+\.\d+$", line), f"no version comment: {line.strip()}"


def test_only_the_sarif_upload_may_write_security_events() -> None:
    writers: set[str] = set()
    for path in WORKFLOWS:
        for name, job in _load(path)["jobs"].items():
            for scope, access in job.get("permissions", {}).items():
                if access == "write":
                    writers.add(f"{path.name}:{name}:{scope}")
    assert writers == {"overrides.yml:sarif:security-events", "ci.yml:overrides:security-events"}
    sarif = _load(ROOT / ".github/workflows/overrides.yml")["jobs"]["sarif"]
    uploads = [s for s in sarif["steps"] if s.get("uses", "").startswith("github/codeql-action/")]
    assert [s["uses"].split("@")[0] for s in uploads] == ["github/codeql-action/upload-sarif"]
    written = next(s["run"] for s in sarif["steps"] if "--format sarif" in s.get("run", ""))
    assert f"> {uploads[0]['with']['sarif_file']}" in written


def test_pull_requests_get_annotations_and_the_gate_fails_on_errors() -> None:
    ci = _load(ROOT / ".github/workflows/ci.yml")
    assert "pull_request" in _triggers(ci)
    assert ci["jobs"]["overrides"]["uses"] == "./.github/workflows/overrides.yml"
    gate = _load(ROOT / ".github/workflows/overrides.yml")["jobs"]["gate"]
    (command,) = [s["run"] for s in gate["steps"] if "harness overrides" in s.get("run", "")]
    assert "--format github" in command
    assert "|| " not in command and "continue-on-error" not in gate  # exit 1 fails the job


def test_the_reusable_workflow_uses_every_input_it_declares() -> None:
    path = ROOT / ".github/workflows/overrides.yml"
    declared = _triggers(_load(path))["workflow_call"]["inputs"]
    assert {"paths", "baseline"} <= set(declared)
    body = path.read_text().split("\njobs:", 1)[1]
    used = set(re.findall(r"\binputs\.([\w-]+)", body))
    assert used == set(declared)
    caller = _load(ROOT / ".github/workflows/ci.yml")["jobs"]["overrides"]["with"]
    required = {name for name, spec in declared.items() if spec.get("required")}
    assert required <= set(caller) <= set(declared)


def test_tests_run_on_python_310_to_312_with_a_pip_cache() -> None:
    jobs = _load(ROOT / ".github/workflows/ci.yml")["jobs"]
    assert jobs["test"]["strategy"]["matrix"]["python-version"] == ["3.10", "3.11", "3.12"]
    for name in ("lint", "test"):
        (setup,) = [s for s in jobs[name]["steps"] if "setup-python" in s.get("uses", "")]
        assert setup["with"]["cache"] == "pip"
        assert setup["with"]["cache-dependency-path"].split() == [
            "pyproject.toml",
            "constraints.txt",
        ]


# --- everything referenced exists ---------------------------------------------------------------


COMMANDS = list(_commands())


@pytest.mark.parametrize(("where", "text"), COMMANDS, ids=[where for where, _ in COMMANDS])
def test_every_make_target_and_script_a_config_runs_exists(where: str, text: str) -> None:
    for match in re.finditer(r"\bmake((?:[ \t]+[a-z][\w-]*)+)", text):
        for target in match.group(1).split():
            assert target in _make_rules(), f"{where}: make {target} has no rule"
    for path in re.findall(r"(?<![\w/.])(\.ci/[\w.-]+|ci/[\w.-]+|scripts/[\w.-]+)", text):
        assert (ROOT / path).is_file(), f"{where}: {path} does not exist"


def test_the_gpu_target_loads_a_plugin_that_exists() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for module in re.findall(r"-p (ci\.[\w.]+)", makefile):
        assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), module


def test_ci_run_calls_make_test() -> None:
    script = (ROOT / ".ci/run").read_text()
    assert "make test" in script
    assert "-eq 5" in script


# --- Buildkite -----------------------------------------------------------------------------------


def _matches(pattern: str, path: str) -> bool:
    """Our subset of Buildkite globs: ``dir/**`` (anything under dir) or an exact path."""
    if pattern.endswith("/**"):
        return path.startswith(pattern[:-2])
    return path == pattern


def _triggered(changed: list[str]) -> list[str]:
    """Labels of the steps a pull request changing ``changed`` runs (``if`` steps run on their
    condition, e.g. nightly on scheduled builds, never on a pull request's paths)."""
    return [
        step["label"]
        for step in _load(PIPELINE)["steps"]
        if "if" not in step and any(_matches(p, c) for p in step["if_changed"] for c in changed)
    ]


def _comment_above(label: str) -> str:
    lines = PIPELINE.read_text().splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.strip() == f'- label: "{label}"']
    first = at
    while lines[first - 1].lstrip().startswith("#"):
        first -= 1
    return "\n".join(lines[first:at])


def test_buildkite_steps_use_make_and_only_untrusted_steps_soft_fail() -> None:
    for step in _load(PIPELINE)["steps"]:
        assert re.match(r"make |bash \.ci/run$|bash (scripts|ci)/[\w.-]+$", step["command"]), step
        assert step["timeout_in_minutes"] > 0, step["label"]
        assert ("if_changed" in step) != ("if" in step), step["label"]  # filtered or conditional
        if step.get("soft_fail"):  # issue 20: a soft_fail step says why its result is untrusted
            assert "soft_fail: not yet trusted" in _comment_above(step["label"]), step["label"]


def test_the_gpu_step_is_a_gate_that_can_fail() -> None:
    (step,) = [s for s in _load(PIPELINE)["steps"] if s["command"].startswith("make test-gpu")]
    assert step["agents"]["queue"] == "gpu"
    assert "soft_fail" not in step  # issue 20: the FlashInfer memory test must be able to go red
    words = step["command"].split()
    assert "REQUIRE_GPU=1" in words
    extras = next(w for w in words if w.startswith("EXTRAS=")).removeprefix("EXTRAS=").split(",")
    assert "gpu" in extras and "eval" in extras
    assert "CONSTRAINTS=ci/constraints-vllm-0.9.0.txt" in words
    assert (ROOT / "ci/constraints-vllm-0.9.0.txt").is_file()
    assert {"reports/junit-gpu.xml", "reports/memory-gpu.json"} <= set(step["artifact_paths"])


def test_compat_runs_nightly() -> None:
    (step,) = [s for s in _load(PIPELINE)["steps"] if s["command"] == "make test-compat"]
    assert step["if"] == 'build.source == "schedule"'


def test_each_step_has_a_duration_comment() -> None:
    lines = PIPELINE.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith("- label:"):
            first = i
            while lines[first - 1].lstrip().startswith("#"):
                first -= 1
            assert re.match(r"\s*# ~\d+ min", lines[first]), line


def test_path_filters_are_simple_and_name_paths_that_exist() -> None:
    for step in _load(PIPELINE)["steps"]:
        for pattern in step.get("if_changed", []):
            assert not re.search(r"[*?\[\]{}]", pattern.removesuffix("/**")), pattern
            target = ROOT / pattern.removesuffix("/**")
            assert target.is_dir() if pattern.endswith("/**") else target.is_file(), pattern


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        (["README.md"], []),
        (["harness/memory/tracker.py"], ["lint", "CPU", "GPU", "override"]),
        (["harness/overrides/since.py"], ["lint", "CPU", "override", "override"]),
        (["constraints.txt"], ["lint", "CPU"]),
        (["suites/overrides/test_rules.py"], ["lint", "CPU"]),
        (["golden/overrides/fixtures.json"], ["CPU"]),
        ([".github/workflows/ci.yml"], ["CPU"]),
        (["ci/pytest_gpu_gate.py"], ["lint", "CPU", "GPU"]),
        (["pyproject.toml"], ["lint", "CPU", "GPU", "override"]),
    ],
)
def test_a_change_triggers_the_steps_that_check_it(changed: list[str], expected: list[str]) -> None:
    labels = _triggered(changed)
    assert [label.split()[0] for label in labels] == expected


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"BUILDKITE_PULL_REQUEST": "17", "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main"},
            "pipeline upload --apply-if-changed --git-diff-base origin/main ci/pipeline.yml",
        ),
        (
            {"BUILDKITE_PULL_REQUEST": "false", "BUILDKITE_BRANCH": "main"},
            "pipeline upload --apply-if-changed=false ci/pipeline.yml",
        ),
        ({}, "pipeline upload --apply-if-changed=false ci/pipeline.yml"),
    ],
    ids=["pull-request", "default-branch", "manual"],
)
def test_upload_filters_pull_requests_only(
    tmp_path: Path, env: dict[str, str], expected: str
) -> None:
    origin, clone = tmp_path / "origin", tmp_path / "clone"
    (clone / "ci").mkdir(parents=True)
    shutil.copy2(ROOT / "ci/upload.sh", clone / "ci/upload.sh")
    shutil.copy2(PIPELINE, clone / "ci/pipeline.yml")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    agent = bin_dir / "buildkite-agent"
    agent.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "agent-args"}\n')
    agent.chmod(0o755)
    git = ["git", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci"]
    subprocess.run([*git, "init", "-q", "-b", "main", str(origin)], check=True)
    subprocess.run(
        [*git, "-C", str(origin), "commit", "-q", "--allow-empty", "-m", "base"], check=True
    )
    subprocess.run([*git, "init", "-q", str(clone)], check=True)
    subprocess.run([*git, "-C", str(clone), "remote", "add", "origin", str(origin)], check=True)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE")}
    run_env = {**clean, **env, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(
        ["bash", str(clone / "ci/upload.sh")], capture_output=True, text=True, env=run_env
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "agent-args").read_text().strip() == expected
    if "BUILDKITE_PULL_REQUEST_BASE_BRANCH" in env:  # the base branch was fetched for the diff
        refs = subprocess.run(
            ["git", "-C", str(clone), "rev-parse", "--verify", "origin/main"], capture_output=True
        )
        assert refs.returncode == 0


# --- pre-commit hook manifest and the Makefile ---------------------------------------------------


def test_the_published_hook_installs_light() -> None:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "strict-overrides"
    assert hook["language"] == "python"  # pip installs this repository: no extras, no deps
    assert "additional_dependencies" not in hook
    assert hook["entry"] == "harness overrides --changed"


@pytest.mark.integration
def test_pre_commit_accepts_the_hook_manifest() -> None:
    out = subprocess.run(
        [str(Path(sys.executable).parent / "pre-commit"), "validate-manifest"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_phony_target_has_a_documented_rule() -> None:
    makefile = (ROOT / "Makefile").read_text()
    (phony,) = re.findall(r"^\.PHONY:(.*)$", makefile, flags=re.M)
    targets = set(phony.split())
    documented = set(re.findall(r"^([a-z][\w-]*):.*## ", makefile, flags=re.M))
    assert targets == documented == _make_rules()
    for required in ("install", "run", "test", "test-gpu", "lint", "typecheck", "help", "bench"):
        assert required in documented


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_help_lists_every_phony_target() -> None:
    (phony,) = re.findall(r"^\.PHONY:(.*)$", (ROOT / "Makefile").read_text(), flags=re.M)
    listed = subprocess.run(["make", "-s", "help"], capture_output=True, text=True, cwd=ROOT)
    assert listed.returncode == 0
    shown = set(re.findall(r"^\s+(?:\x1b\[\d+m)?([a-z][\w-]*)", listed.stdout, flags=re.M))
    assert shown == set(phony.split())


# --- the README's "Use it in your CI" snippets ---------------------------------------------------


def _readme_yaml_blocks() -> list[dict[str, Any]]:
    text = (ROOT / "README.md").read_text().split("## Use it in your CI", 1)[1].split("\n## ")[0]
    blocks = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.S)]
    assert len(blocks) == 3 and all(isinstance(b, dict) for b in blocks)
    return blocks


def test_the_readme_snippets_match_the_configs(tmp_path: Path) -> None:
    pre_commit, github, buildkite = _readme_yaml_blocks()
    hook_ids = {h["id"] for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert {h["id"] for r in pre_commit["repos"] for h in r["hooks"]} <= hook_ids
    job = github["jobs"]["overrides"]
    workflow_path = job["uses"].split("/", 2)[2].split("@")[0]
    declared = _triggers(_load(ROOT / workflow_path))["workflow_call"]["inputs"]
    required = {name for name, spec in declared.items() if spec.get("required")}
    assert required <= set(job["with"]) <= set(declared)
    assert job["permissions"]["security-events"] == "write"
    snippet = tmp_path / "pipeline.yml"
    snippet.write_text(yaml.safe_dump(buildkite))
    out = subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.buildkite", str(snippet)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


# --- vLLM's CI: ci/vllm/test_areas/harness.yaml (its format and embeddings: suites/ci/) -----------


def test_the_readme_shows_the_vllm_steps_exactly() -> None:
    text = (ROOT / "README.md").read_text().split("## Use it in vLLM's CI", 1)[1].split("\n## ")[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    lines = VLLM_STEPS.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if not line.startswith("#"))  # after the header
    assert block.strip() == "\n".join(lines[first:]).strip()


def test_make_has_a_system_mode_that_installs_nothing() -> None:
    """What test_make_can_use_an_existing_interpreter (integration) runs through make -n."""
    makefile = (ROOT / "Makefile").read_text()
    system = makefile.split("else ifeq ($(PYTHON_ENV),system)", 1)[1].split("else", 1)[0]
    assert "PY := $(PYTHON)" in system and "STAMP :=" in system


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_can_use_an_existing_interpreter() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}

    def dry(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["make", "--no-print-directory", "-n", *argv],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=60,
        )

    system = ("PYTHON_ENV=system", "PYTHON=/opt/image/bin/python3")
    test = dry("test", *system)
    assert test.returncode == 0, test.stderr
    assert test.stdout.startswith("/opt/image/bin/python3 -m pytest "), test.stdout
    assert "pip install" not in test.stdout and "venv" not in test.stdout
    install = dry("install", *system).stdout
    assert "pip" not in install and "venv" not in install
    gpu = dry("test-gpu", "REQUIRE_GPU=True", *system)
    assert "'--require-gpu=True'" in gpu.stdout and "pip" not in gpu.stdout
    assert "'--require-gpu='" in dry("test-gpu", *system).stdout
    bad = dry("test", "PYTHON_ENV=conda")
    assert bad.returncode != 0 and "PYTHON_ENV=conda: use venv" in bad.stderr


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"BUILDKITE_PULL_REQUEST": "17", "BUILDKITE_PULL_REQUEST_BASE_BRANCH": "main"},
            "overrides SINCE={base}",
        ),
        ({"BUILDKITE_PULL_REQUEST": "false"}, "overrides"),
    ],
    ids=["pull-request", "branch"],
)
def test_the_override_step_runs_since_the_merge_base_on_pull_requests(
    tmp_path: Path, env: dict[str, str], expected: str
) -> None:
    origin, clone = tmp_path / "origin", tmp_path / "clone"
    (clone / "ci").mkdir(parents=True)
    shutil.copy2(ROOT / "ci/overrides_since.sh", clone / "ci/overrides_since.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_make = bin_dir / "make"
    fake_make.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "make-args"}\n')
    fake_make.chmod(0o755)
    git = ["git", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci"]
    subprocess.run([*git, "init", "-q", "-b", "main", str(origin)], check=True)
    subprocess.run(
        [*git, "-C", str(origin), "commit", "-q", "--allow-empty", "-m", "b"], check=True
    )
    subprocess.run([*git, "clone", "-q", str(origin), str(clone / "repo")], check=True)
    repo = clone / "repo"
    shutil.copytree(clone / "ci", repo / "ci")
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "pr"], check=True)
    base = subprocess.run(
        ["git", "-C", str(origin), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BUILDKITE")}
    run_env = {**clean, **env, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(
        ["bash", str(repo / "ci/overrides_since.sh")], capture_output=True, text=True, env=run_env
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "make-args").read_text().strip() == expected.format(base=base)


def test_the_reusable_workflow_runs_since_the_base_on_pull_requests() -> None:
    gate = _load(ROOT / ".github/workflows/overrides.yml")["jobs"]["gate"]
    (checkout,) = [s for s in gate["steps"] if "actions/checkout" in s.get("uses", "")]
    assert checkout["with"]["fetch-depth"] == 0
    (step,) = [s for s in gate["steps"] if "harness overrides" in s.get("run", "")]
    assert step["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    assert 'args+=(--since "$BASE_SHA")' in step["run"]
