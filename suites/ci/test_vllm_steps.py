"""ci/vllm/test_areas/harness.yaml: steps vLLM's pipeline generator accepts, in every embedding.

The file follows vLLM's per-area step files (``.buildkite/test_areas/*.yaml``, listed as a
``job_dir`` of ``.buildkite/ci_config.yaml``). Its keys are checked against the fields of the
step model of vLLM's current generator (``buildkite/pipeline_generator/step.py`` in
vllm-project/ci-infra, as read for issue 28), plus ``fast_check``, which only the older
template-rendered generator read. Each step's commands are then rendered the ways vLLM's
generators have run them, and each rendering must parse as YAML and as bash, with the commands
coming out unchanged:

- the docker plugin's ``command: ["bash", "-xc", "... && cd DIR && C1 && C2"]`` (a YAML
  double-quoted string: a ``"`` in a command ends it early, a ParserError for the whole upload);
- the Kubernetes plugin's ``bash -c '... && cd DIR && C1 && C2'`` (a shell single-quoted string);
- the current generator's commands list, after its ``'`` to ``"`` rewrite and Buildkite's
  ``$`` interpolation at upload.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
STEPS_FILE = ROOT / "ci/vllm/test_areas/harness.yaml"
WORKING_DIR = "/vllm-workspace/tests"
"""Where the generator runs a test-area step that names no working_dir."""

GENERATOR_STEP_KEYS = {
    # The fields of the current generator's Step model (pydantic; other keys are ignored).
    "label",
    "group",
    "working_dir",
    "key",
    "depends_on",
    "commands",
    "device",
    "agent_tags",
    "num_devices",
    "num_nodes",
    "source_file_dependencies",
    "soft_fail",
    "parallelism",
    "concurrency",
    "concurrency_group",
    "timeout_in_minutes",
    "mount_buildkite_agent",
    "env",
    "retry",
    "optional",
    "no_plugin",
    "no_gpu",
    "dind",
    "mirror",
}
OLDER_GENERATOR_KEYS = {"fast_check"}
CPU_DEVICES = {"cpu", "cpu-small", "cpu-medium"}
GPU_DEVICES = {"a100", "h100", "h200", "b200"}


def _file() -> dict[str, Any]:
    data = yaml.safe_load(STEPS_FILE.read_text())
    assert isinstance(data, dict)
    return data


STEPS: list[dict[str, Any]] = _file()["steps"]


def _step(key: str) -> dict[str, Any]:
    (step,) = [s for s in STEPS if s["key"] == key]
    return step


def _script(step: dict[str, Any]) -> str:
    """What a template runs for ``step``: its setup, then its commands joined with ``&&``."""
    joined = " && ".join(step["commands"])
    return f"(command nvidia-smi || true) && cd {step.get('working_dir', WORKING_DIR)} && {joined}"


def docker_plugin_shape(script: str) -> str:
    """The docker plugin's command line of vLLM's step template (YAML, double-quoted)."""
    return f'command: ["bash", "-xc", "{script}"]\n'


def kubernetes_shape(script: str) -> str:
    """The Kubernetes plugin's container command of vLLM's step template (shell single quotes)."""
    return f"command:\n  - bash -c '{script}'\n"


def generator_shape(commands: list[str]) -> str:
    """The current generator's commands list: ``'`` becomes ``"``, then YAML (``yaml.dump``)."""
    return yaml.dump({"commands": [c.replace("'", '"') for c in commands]})


def _bash_parses(script: str) -> None:
    done = subprocess.run(["bash", "-n", "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def render(shape: str, step: dict[str, Any]) -> str:
    """The script ``shape`` hands to bash for ``step``, read back as YAML and the shell would
    read it (a YAML or shell error propagates)."""
    script = _script(step)
    if shape == "docker":
        command = yaml.safe_load(docker_plugin_shape(script))["command"]
        assert command[:2] == ["bash", "-xc"] and len(command) == 3, command
        return str(command[2])
    if shape == "kubernetes":
        (line,) = yaml.safe_load(kubernetes_shape(script))["command"]
        words = shlex.split(line)
        assert words[:2] == ["bash", "-c"] and len(words) == 3, words
        return words[2]
    assert shape == "generator"
    return " && ".join(yaml.safe_load(generator_shape(step["commands"]))["commands"])


SHAPES = ("docker", "kubernetes", "generator")


# --- the format -------------------------------------------------------------------------------


def test_the_file_is_a_test_area() -> None:
    data = _file()
    assert set(data) == {"group", "depends_on", "steps"}
    assert data["depends_on"] == ["image-build"]
    assert len(STEPS) == 2


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s["key"])
def test_each_step_uses_only_keys_a_generator_reads(step: dict[str, Any]) -> None:
    assert set(step) <= GENERATOR_STEP_KEYS | OLDER_GENERATOR_KEYS, set(step) - GENERATOR_STEP_KEYS
    assert isinstance(step["label"], str) and step["label"]
    assert re.fullmatch(r"harness-[a-z0-9-]+", step["key"])
    assert isinstance(step["timeout_in_minutes"], int) and step["timeout_in_minutes"] > 0
    assert step["device"] in CPU_DEVICES | GPU_DEVICES
    assert all(isinstance(c, str) and c for c in step["commands"])
    for dependency in step["source_file_dependencies"]:
        # The generator matches a changed file equal to the path or under it: no globs.
        assert not re.search(r"[*?\[\]{}]", dependency) and not dependency.endswith("/")
        assert dependency.startswith(("vllm/", "requirements/")), dependency


def test_the_keys_are_unique() -> None:
    assert len({s["key"] for s in STEPS}) == len(STEPS)


def test_the_static_step_takes_no_gpu_and_runs_on_attention_and_worker_changes() -> None:
    step = _step("harness-override-checker")
    assert step["device"] in CPU_DEVICES and step["no_gpu"] is True and step["fast_check"] is True
    assert step["depends_on"] == ["image-build-cpu"]  # the image a CPU device pulls
    assert {"vllm/v1/attention", "vllm/v1/worker"} <= set(step["source_file_dependencies"])
    (check,) = [c for c in step["commands"] if "ci/vllm_overrides.py" in c]
    words = check.split()
    assert "--since-merge-base" in words and "--vllm" not in words  # what import vllm loads
    assert words[words.index("--repo") + 1] == "/workdir"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_fetch_writes_the_branch_the_merge_base_reads_in_a_single_branch_clone(
    tmp_path: Path,
) -> None:
    """An agent may clone the pull request's branch alone (``--single-branch``, a clone flag):
    there ``git fetch origin main`` writes only FETCH_HEAD, and ``origin/main`` does not exist."""
    step = _step("harness-override-checker")
    (check,) = [c for c in step["commands"] if "ci/vllm_overrides.py" in c]
    words = check.split()
    remote, _, branch = words[words.index("--since-merge-base") + 1].partition("/")
    (fetch,) = [c for c in step["commands"] if " fetch " in c]

    def git(*argv: str, cwd: Path = tmp_path) -> str:
        ident = ["-c", "user.email=ci@example.invalid", "-c", "user.name=ci"]
        done = subprocess.run(["git", *ident, *argv], cwd=cwd, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git("init", "-q", "-b", branch, cwd=upstream)
    git("commit", "-q", "--allow-empty", "-m", "base", cwd=upstream)
    git("checkout", "-qb", "pr", cwd=upstream)
    git("commit", "-q", "--allow-empty", "-m", "pr", cwd=upstream)
    git("clone", "-q", "--single-branch", "-b", "pr", "-o", remote, upstream.as_uri(), "workdir")
    workdir = tmp_path / "workdir"
    git(*shlex.split(fetch.replace("/workdir", str(workdir)))[1:])
    assert git("rev-parse", f"{remote}/{branch}", cwd=workdir) == git(
        "rev-parse", branch, cwd=upstream
    )


def test_the_gpu_step_installs_beside_the_image_and_requires_a_gpu() -> None:
    step = _step("harness-flashinfer-memory")
    assert step["device"] in GPU_DEVICES and step["num_devices"] == 1
    assert "soft_fail" not in step and "optional" not in step
    (install,) = [c for c in step["commands"] if "install_beside.py" in c]
    assert install.split()[-1] == "gpu,eval,test"
    (make,) = [c for c in step["commands"] if "test-gpu" in c]
    assert {"REQUIRE_GPU=1", "PYTHON_ENV=system", "PYTHON=python3"} <= set(make.split())
    assert not any(c.startswith("pip ") for c in step["commands"])  # nothing moves the image


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s["key"])
def test_every_script_a_step_runs_is_in_this_repository(step: dict[str, Any]) -> None:
    for path in re.findall(r"/tmp/harness/([\w./-]+\.py)", " ".join(step["commands"])):
        assert (ROOT / path).is_file(), path


# --- the embeddings -----------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("step", STEPS, ids=lambda s: s["key"])
def test_each_step_survives_every_embedding_unchanged(step: dict[str, Any], shape: str) -> None:
    script = render(shape, step)
    assert script.endswith(" && ".join(step["commands"])), script
    _bash_parses(script)
    assert "$" not in script, f"Buildkite would interpolate {script!r}"


def joined_meaning_changes(command: str) -> list[str]:
    """What makes ``command`` mean something else once the templates join the commands with
    `` && `` (and the generator runs them one by one): a comment hides every command after it;
    ``;``, a newline, ``||`` and ``&`` run what follows whatever failed before; a pipeline's
    status is its last command's, so a failure before a ``|`` passes."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.commenters = ""  # a comment is a word that starts with #, as bash reads it
    lexer.whitespace_split = True
    found = [f"a comment ({w})" for w in lexer if w.startswith("#")]
    operators = shlex.shlex(command, posix=True, punctuation_chars=True)
    found += [f"{w!r}" for w in operators if w in (";", "||", "&", "|", "|&", ";;")]
    return found + (["a newline"] if "\n" in command.strip() else [])


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s["key"])
def test_each_command_means_the_same_joined_with_and(step: dict[str, Any]) -> None:
    for command in step["commands"]:
        assert joined_meaning_changes(command) == [], command


@pytest.mark.parametrize(
    ("command", "found"),
    [
        ("make -C /tmp/harness test-gpu  # the GPU suites", ["a comment (#)"]),
        ("pip download x; true", ["';'"]),
        ("python3 check.py || true", ["'||'"]),
        ("python3 check.py | tee log.txt", ["'|'"]),
        ("python3 check.py &", ["'&'"]),
        ("git fetch origin +main:refs/remotes/origin/main", []),
        ("python3 a#b.py --x=1", []),
    ],
)
def test_a_command_whose_meaning_changes_once_joined_is_found(
    command: str, found: list[str]
) -> None:
    assert joined_meaning_changes(command) == found
    script = render("docker", {"commands": [command, "echo the last command"]})
    assert script.endswith(f"{command} && echo the last command")  # unchanged: only this check


@pytest.mark.parametrize(
    ("command", "shape", "error"),
    [
        (
            'pip install "attn-metadata-harness @ git+https://github.com/OWNER/harness@COMMIT"',
            "docker",
            yaml.YAMLError,
        ),
        (
            'harness overrides --since "$$(git merge-base HEAD origin/main)" vllm',
            "docker",
            yaml.YAMLError,
        ),
        ("python3 -c 'print(1)'", "kubernetes", None),
        ("python3 -c 'print(1)'", "generator", None),
    ],
    ids=["double-quote", "command-substitution", "single-quote", "rewritten-quote"],
)
def test_the_renderings_catch_what_broke_vllms_pipeline(
    command: str, shape: str, error: type[Exception] | None
) -> None:
    """The seed's commands (issue 28) fail the shape named: a parse error, or a changed command."""
    step = {"commands": ["true", command]}
    if error is not None:
        with pytest.raises(error):
            render(shape, step)
        return
    assert not render(shape, step).endswith(" && ".join(step["commands"]))


@pytest.mark.integration
def test_the_source_dependencies_exist_in_the_newest_vllm() -> None:
    from harness.vllm_tree.fetch import fetch_vllm_source

    root = fetch_vllm_source("0.34.0").root  # the wheel: vllm/ only (requirements/ is not in it)
    for step in STEPS:
        for dependency in step["source_file_dependencies"]:
            if dependency.startswith("vllm/"):
                assert (root / dependency).exists(), f"{step['key']}: {dependency}"
