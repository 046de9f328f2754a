"""``harness overrides`` as users and CI drive it: exit codes, formats, explain, baseline, ignores."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

DRIFT_CODES = [f"HO{n}" for n in range(101, 111)]
ALL_CODES = [*DRIFT_CODES, "HO201", "HO202", "HO301", "HO302", "HO303"]
ALL_CODES += ["HO401", "HO402", "HO403", "HO404", "HO405"]
# The fixed documentation sections of every rule (ruff's rule docs shape).
SECTIONS = ["what it does", "why", "example", "use instead", "limitations", "references"]

REPRO = textwrap.dedent(
    """\
    class A:
        def func(self, a: int, b: int) -> int:
            return a + b

        def func2(self, a: int, b: int) -> int:
            return self.func(a, b=b)


    class B(A):
        def func(self, a: int, bb: int) -> int:{ignore}
            return a - bb
    """
)
WARNING_ONLY = textwrap.dedent(
    """\
    class Base:
        def forward(self, query: int, key: int) -> int:
            return query


    class Swapped(Base):
        def forward(self, key: int, query: int) -> int:
            return key
    """
)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project directory, made the working directory."""
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


# Exit codes


@pytest.mark.parametrize(
    ("files", "fail_on", "exit_code"),
    [
        ({"repro.py": REPRO.format(ignore="")}, [], 1),
        ({"repro.py": REPRO.format(ignore="")}, ["--fail-on", "warning"], 1),
        ({"swapped.py": WARNING_ONLY}, [], 0),
        ({"swapped.py": WARNING_ONLY}, ["--fail-on", "error"], 0),
        ({"swapped.py": WARNING_ONLY}, ["--fail-on", "warning"], 1),
        ({"empty.py": ""}, ["--fail-on", "warning"], 0),
    ],
)
def test_exit_codes(
    files: dict[str, str], fail_on: list[str], exit_code: int, project: Path, overrides: Any
) -> None:
    _write(project, files)
    run = overrides(*fail_on, ".")
    assert run.exit_code == exit_code, run.out + run.err


@pytest.mark.parametrize(
    ("args", "mentions"),
    [
        (["does-not-exist"], "does-not-exist"),
        (["--explain", "HO999"], "HO101"),  # an unknown name lists what is available
        (["--fail-on", "sometimes", "."], "sometimes"),
        (["--format", "xml", "."], "xml"),
        (["--baseline", "no-such-baseline.json", "."], "no-such-baseline.json"),
        (["--jobs", "x", "."], "--jobs"),
        (["--jobs", "0", "."], "--jobs"),
        (["--write-baseline", "b.json", "--changed", "ok.py"], "--write-baseline"),
    ],
)
def test_usage_errors_exit_2_with_a_clean_message(
    args: list[str], mentions: str, project: Path, overrides: Any
) -> None:
    _write(project, {"ok.py": "class A:\n    pass\n"})
    run = overrides(*args)
    assert run.exit_code == 2, run.out
    assert "error:" in run.err and mentions in run.err, run.err
    assert len(run.err.strip().splitlines()) == 1, run.err  # one line, no usage text


# --explain


@pytest.mark.parametrize("code", ALL_CODES)
def test_explain_prints_the_rule_documentation(code: str, overrides: Any) -> None:
    run = overrides("--explain", code)
    assert run.exit_code == 0, run.err
    text = run.out.lower()
    assert code.lower() in text
    missing = [s for s in SECTIONS if not re.search(rf"^#*\s*{s}", text, re.M)]
    assert not missing, f"{code}: sections missing from --explain: {missing}\n{run.out}"


@pytest.mark.parametrize("code", DRIFT_CODES)
def test_why_it_matters_cites_vllm(code: str, overrides: Any) -> None:
    assert "vllm" in overrides("--explain", code).out.lower()


# Formats


def test_text_format_shows_both_signatures(project: Path, overrides: Any) -> None:
    _write(project, {"repro.py": REPRO.format(ignore="")})
    run = overrides("repro.py")
    first = run.out.splitlines()[0]
    assert re.match(r"^repro\.py:10:\d+: HO101 renamed-parameter ", first), first
    assert "func(self, a, b)" in run.out
    assert "func(self, a, bb)" in run.out
    assert "repro.py:6" in run.out  # the crashing call


def test_sarif_is_valid_2_1_0(project: Path, overrides: Any) -> None:
    _write(project, {"repro.py": REPRO.format(ignore=""), "swapped.py": WARNING_ONLY})
    findings = overrides.json(".")
    run = overrides("--format", "sarif", ".")
    assert run.exit_code == 1
    sarif = json.loads(run.out)
    assert sarif["version"] == "2.1.0"
    assert "sarif" in sarif["$schema"] and "2.1.0" in sarif["$schema"]
    (sarif_run,) = sarif["runs"]
    driver = sarif_run["tool"]["driver"]
    assert driver["name"]
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert {"HO101", "HO102"} <= set(rule_ids)
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"]
    results = sarif_run["results"]
    assert len(results) == len(findings)
    got = set()
    for result in results:
        assert result["ruleId"] in rule_ids
        assert result["level"] in ("error", "warning")
        assert result["message"]["text"]
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        region = physical["region"]
        assert region["startLine"] >= 1 and region.get("startColumn", 1) >= 1
        got.add(
            (
                physical["artifactLocation"]["uri"],
                region["startLine"],
                result["ruleId"],
                result["level"],
            )
        )
    want = {(f["path"], f["line"], f["code"], f["severity"]) for f in findings}
    assert got == want


_GITHUB = re.compile(
    r"^::(?P<level>error|warning) file=(?P<file>[^,]+),line=(?P<line>\d+)(?P<rest>[^:]*)::(?P<msg>.+)$"
)


def test_github_annotations(project: Path, overrides: Any) -> None:
    _write(project, {"repro.py": REPRO.format(ignore=""), "swapped.py": WARNING_ONLY})
    findings = overrides.json(".")
    run = overrides("--format", "github", ".")
    lines = [line for line in run.out.splitlines() if line.startswith("::")]
    matches = [_GITHUB.match(line) for line in lines]
    assert all(matches), lines
    got = {(m["file"], int(m["line"]), m["level"]) for m in matches if m}
    assert got == {(f["path"], f["line"], f["severity"]) for f in findings}
    assert all("HO1" in m["msg"] or "HO1" in m["rest"] for m in matches if m)


def test_json_fields_and_order(project: Path, overrides: Any) -> None:
    _write(project, {"b.py": REPRO.format(ignore=""), "a.py": WARNING_ONLY})
    findings = overrides.json(".")
    keys = {"path", "line", "col", "code", "symbol", "severity", "class", "method", "base_class"}
    keys |= {"base_path", "base_line", "message", "evidence"}
    assert all(keys <= set(f) for f in findings)
    order = [(f["path"], f["line"], f["col"], f["code"]) for f in findings]
    assert order == sorted(order) and [f["path"] for f in findings] == ["a.py", "b.py"]
    (crash,) = [f for f in findings if f["severity"] == "error"]
    assert (crash["evidence"]["path"], crash["evidence"]["line"]) == ("b.py", 6)
    assert "unexpected keyword argument 'b'" in crash["evidence"]["error"]
    assert (crash["base_path"], crash["base_line"]) == ("b.py", 2)


# Baseline


def test_baseline_round_trip(project: Path, overrides: Any, tmp_path: Path) -> None:
    _write(project, {"repro.py": REPRO.format(ignore=""), "swapped.py": WARNING_ONLY})
    baseline = tmp_path / "baseline.json"
    written = overrides("--write-baseline", baseline, ".")
    assert written.exit_code == 0, written.err
    assert baseline.read_text()

    def check() -> Any:
        return overrides("--fail-on", "warning", "--baseline", baseline, ".")

    clean = check()
    assert clean.exit_code == 0, clean.out

    # Moving code around (new lines above, a class moved down) keeps it hidden.
    moved = "# a comment\n\n\n" + REPRO.format(ignore="")
    _write(project, {"repro.py": moved, "swapped.py": "\n\n" + WARNING_ONLY})
    assert check().exit_code == 0, check().out

    # A new drift of the same rule in the same file fails.
    new_class = "\n\nclass C(A):\n    def func(self, a: int, c: int) -> int:\n        return a\n"
    _write(project, {"repro.py": moved + new_class})
    new = overrides("--format", "json", "--fail-on", "warning", "--baseline", baseline, ".")
    assert new.exit_code == 1
    assert [(f["class"], f["code"], f["severity"]) for f in new.json()] == [
        ("repro.C", "HO101", "error")
    ]


def test_baseline_keys_on_the_drifted_parameter(
    project: Path, overrides: Any, tmp_path: Path
) -> None:
    _write(project, {"repro.py": REPRO.format(ignore="")})
    baseline = tmp_path / "baseline.json"
    assert overrides("--write-baseline", baseline, ".").exit_code == 0
    # Same class, method and rule, but now a different parameter drifted: that is new drift.
    _write(
        project, {"repro.py": REPRO.format(ignore="").replace("a: int, bb: int", "x: int, b: int")}
    )
    run = overrides("--format", "json", "--baseline", baseline, ".")
    assert run.exit_code == 0  # a warning now: `b` is accepted again, `a` was renamed
    assert sorted((f["class"], f["code"]) for f in run.json() if f["code"] != "HO303") == [
        ("repro.B", "HO101")
    ]


# Inline suppression


@pytest.mark.parametrize(
    ("ignore", "codes"),
    [
        ("  # harness: ignore[HO101]", []),
        ("  # harness: ignore[HO103, HO101]", ["HO301"]),  # HO103 matches nothing
        ("  # harness: ignore[HO103]", ["HO101", "HO301"]),
        ("  # harness: ignore", ["HO101", "HO302"]),  # a bare ignore suppresses nothing
    ],
)
def test_inline_ignore(ignore: str, codes: list[str], project: Path, overrides: Any) -> None:
    _write(project, {"repro.py": REPRO.format(ignore=ignore)})
    findings = overrides.json(".")
    assert sorted(f["code"] for f in findings) == codes
    assert all(f["line"] == 10 for f in findings)
    suppressed_error = "HO101" not in codes
    run = overrides(".")
    assert run.exit_code == (0 if suppressed_error else 1)


# Pre-commit

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_pre_commit_hook_runs_as_declared(
    overrides: Any, corpus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook's entry plus the staged base file reports the stale subclass in another file."""
    from pre_commit.clientlib import load_manifest

    (hook,) = load_manifest(REPO_ROOT / ".pre-commit-hooks.yaml")
    assert (hook["id"], hook["language"], hook["types"]) == (
        "strict-overrides",
        "python",
        ["python"],
    )
    assert hook["pass_filenames"] and hook["require_serial"]
    program, subcommand, *options = shlex.split(hook["entry"])
    assert (program, subcommand) == ("harness", "overrides")
    monkeypatch.chdir(corpus.root)
    run = overrides(*options, "changed_files/base.py")
    assert run.exit_code == 1, run.out + run.err
    assert "changed_files/stale.py" in run.out and "changed_files/leaf.py" in run.out
    assert "unrelated.py" not in run.out


@pytest.mark.parametrize(
    "args",
    [[], ["--format", "github"], ["--fail-on", "warning"], ["--no-cache"], ["--select", "HO201"]],
)
def test_pre_commit_hook_takes_args(
    args: list[str], overrides: Any, corpus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pre-commit runs ``entry + args + files``: ``--changed`` then takes no path of its own
    and the staged files are the positional paths."""
    from pre_commit.clientlib import load_manifest

    (hook,) = load_manifest(REPO_ROOT / ".pre-commit-hooks.yaml")
    options = shlex.split(hook["entry"])[2:]
    monkeypatch.chdir(corpus.root)
    run = overrides(*options, *args, "changed_files/base.py", "changed_files/unrelated.py")
    assert run.exit_code == 1, run.out + run.err
    assert "changed_files/stale.py" in run.out and "changed_files/leaf.py" in run.out
    if args[:1] == ["--format"]:
        assert run.out.startswith("::")


@pytest.mark.parametrize("fmt", ["text", "github"])
def test_a_blocked_hook_shows_what_blocks_and_counts_the_rest(
    project: Path, overrides: Any, fmt: str
) -> None:
    """Issue 28, item 4: one error, one screen; ``--show warnings`` lists the rest after it."""
    _write(project, {"repro.py": REPRO.format(ignore=""), "swapped.py": WARNING_ONLY})
    files = ["--changed", "repro.py", "swapped.py"]
    run = overrides("--format", fmt, *files)
    assert run.exit_code == 1
    lines = run.out.splitlines()
    assert "HO101" in lines[0] and "Swapped" not in run.out
    assert lines[-1] == (
        "harness overrides: 1 more finding(s) below --fail-on error not shown "
        "(--show warnings lists them)"
    )
    listed = overrides("--format", fmt, "--show", "warnings", *files)
    assert listed.exit_code == 1 and "more finding(s)" not in listed.out
    assert listed.out.index("HO101") < listed.out.index("Swapped")
    # A passing hook, a whole-tree run and the machine formats list everything, as before.
    assert "Swapped" in overrides("--format", fmt, "--changed", "swapped.py").out
    assert "Swapped" in overrides("--format", fmt, ".").out
    assert len(json.loads(overrides("--format", "json", *files).out)) == 2


def test_pre_commit_hook_takes_a_baseline_arg(
    project: Path, overrides: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(project, {"repro.py": REPRO.format(ignore="")})
    assert overrides("--write-baseline", "baseline.json", ".").exit_code == 0
    from pre_commit.clientlib import load_manifest

    (hook,) = load_manifest(REPO_ROOT / ".pre-commit-hooks.yaml")
    options = shlex.split(hook["entry"])[2:]
    assert overrides(*options, "repro.py").exit_code == 1
    run = overrides(*options, "--baseline", "baseline.json", "repro.py")
    assert (run.exit_code, run.out) == (0, ""), run.out + run.err


def test_changed_paths_that_do_not_exist_are_named(project: Path, overrides: Any) -> None:
    """A mistyped ``--changed`` path is a deletion (its subclasses are re-checked), said once."""
    _write(project, {"base.py": REPRO.format(ignore="")})
    run = overrides("--changed", "bsae.py", "base.py", "gone/")
    assert run.exit_code == 1, run.out + run.err
    assert run.err.count("not found; treated as deleted: bsae.py, gone/") == 1, run.err
    assert "treated as deleted" not in overrides("--changed", "base.py").err


def test_own_pre_commit_config_runs_the_checker_from_the_venv() -> None:
    from pre_commit.clientlib import load_config

    (local,) = load_config(REPO_ROOT / ".pre-commit-config.yaml")["repos"]
    hooks = {hook["id"]: hook for hook in local["hooks"]}
    assert {"ruff", "ruff-format", "mypy", "pyright", "strict-overrides"} <= set(hooks)
    entry = shlex.split(hooks["strict-overrides"]["entry"])
    assert (REPO_ROOT / entry[0]).is_file() and entry[1:3] == ["-m", "harness.overrides"]
    assert entry[-1] == "--changed" and hooks["strict-overrides"]["pass_filenames"]


def test_baseline_escalation_is_new(project: Path, overrides: Any, tmp_path: Path) -> None:
    """A baselined warning that a new call proves to crash is reported (issue 12)."""
    uncalled = REPRO.format(ignore="").replace("return self.func(a, b=b)", "return 0")
    _write(project, {"repro.py": uncalled})
    baseline = tmp_path / "baseline.json"
    assert overrides("--write-baseline", baseline, ".").exit_code == 0
    assert overrides("--fail-on", "warning", "--baseline", baseline, ".").exit_code == 0
    _write(project, {"repro.py": REPRO.format(ignore="")})  # now a call proves the crash
    run = overrides("--format", "json", "--baseline", baseline, ".")
    assert run.exit_code == 1
    assert sorted((f["code"], f["severity"]) for f in run.json()) == [
        ("HO101", "error"),
        ("HO303", "warning"),  # the warning's entry is stale now
    ]


def test_stale_baseline_entries_are_reported_and_pruned(
    project: Path, overrides: Any, tmp_path: Path
) -> None:
    _write(project, {"repro.py": REPRO.format(ignore=""), "swapped.py": WARNING_ONLY})
    baseline = tmp_path / "baseline.json"
    assert overrides("--write-baseline", baseline, ".").exit_code == 0
    _write(project, {"swapped.py": "class Base: ...\n"})  # the warning is fixed
    run = overrides("--format", "json", "--baseline", baseline, ".")
    assert run.exit_code == 0  # a stale entry is a warning
    (stale,) = run.json()
    assert (stale["code"], stale["symbol"]) == ("HO303", "stale-baseline-entry")
    lines = baseline.read_text().splitlines()
    assert stale["path"] == str(baseline) and "swapped.Swapped.forward" in lines[stale["line"] - 1]
    assert overrides("--fail-on", "warning", "--baseline", baseline, ".").exit_code == 1
    assert overrides.json("--baseline", baseline, "--changed", "repro.py") == []  # no scope
    rewritten = overrides("--write-baseline", baseline, ".")
    assert "1 stale entries dropped" in rewritten.err
    assert overrides("--fail-on", "warning", "--baseline", baseline, ".").exit_code == 0


def test_version_1_baselines_ask_to_be_written_again(
    project: Path, overrides: Any, tmp_path: Path
) -> None:
    _write(project, {"repro.py": REPRO.format(ignore="")})
    old = tmp_path / "old.json"
    old.write_text('{"version": 1, "tool": "harness overrides", "findings": []}')
    run = overrides("--baseline", old, ".")
    assert run.exit_code == 2 and "--write-baseline" in run.err


# Output that cannot be written: one line, exit 2 (issue 12)


def _subprocess(*args: str, cwd: Path, stdout: Any) -> subprocess.Popen[bytes]:
    exe = Path(sys.executable).with_name("harness")
    return subprocess.Popen(
        [str(exe), "overrides", "--no-cache", *args], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE
    )


def test_closed_pipe_is_one_line_and_exit_2(project: Path) -> None:
    _write(project, {"repro.py": REPRO.format(ignore="")})
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read
    try:
        proc = _subprocess(".", cwd=project, stdout=write_end)
    finally:
        os.close(write_end)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert err.decode().strip().splitlines() == [
        "harness overrides: error: cannot write the report: Broken pipe"
    ]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_full_disk_is_one_line_and_exit_2(project: Path) -> None:
    _write(project, {"repro.py": REPRO.format(ignore="")})
    with open("/dev/full", "wb") as full:
        proc = _subprocess(".", cwd=project, stdout=full)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    (line,) = err.decode().strip().splitlines()
    assert "No space left on device" in line


@pytest.mark.integration  # over ~2 s: the slow tier
def test_non_utf8_and_odd_file_names_in_every_format(project: Path, overrides: Any) -> None:
    names = ["with space.py", "100%.py", "issue#12.py", "café.py"]
    _write(project, {name: REPRO.format(ignore="") for name in names})
    fd = os.open(os.path.join(os.fsencode(project), b"bad\xff.py"), os.O_WRONLY | os.O_CREAT)
    os.write(fd, REPRO.format(ignore="").encode())
    os.close(fd)
    sarif = json.loads(overrides("--format", "sarif", ".").out)
    results = sarif["runs"][0]["results"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert uris == {"with%20space.py", "100%25.py", "issue%2312.py", "caf%C3%A9.py", "bad%FF.py"}
    for fmt in ("text", "github"):  # the file's own bytes come back, as a terminal shows them
        proc = _subprocess("--format", fmt, ".", cwd=project, stdout=subprocess.PIPE)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1 and b"Traceback" not in err, err
        assert b"bad\xff.py" in out and "café.py".encode() in out


def test_a_path_cannot_forge_a_line_of_the_text_format(project: Path, overrides: Any) -> None:
    """Issue 27, bug 9: a directory named with a newline and ``::error ...`` printed raw
    makes GitHub read an annotation the checker never wrote (github and sarif escape it)."""
    forged = "pkg\n::error file=forged.py,line=1::forged\x1b[2K"
    _write(project, {f"{forged}/repro.py": REPRO.format(ignore="")})
    for fmt in ("text", "github"):
        out = overrides("--format", fmt, ".").out
        lines = out.splitlines()
        assert not any(line.startswith("::error file=forged") for line in lines), out
    text = overrides("--format", "text", ".").out
    assert "\x1b" not in text
    assert text.startswith("pkg\\n::error file=forged.py,line=1::forged\\x1b[2K/repro.py:")


# Nothing to check, and no working directory


@pytest.mark.parametrize(
    ("files", "config"),
    [
        ({"README.md": "# no Python here\n"}, ""),
        ({"a.py": "class A:\n    pass\n"}, '[tool.harness.overrides]\nexclude = ["*"]\n'),
    ],
)
def test_nothing_to_check_is_a_usage_error_unless_allowed(
    files: dict[str, str], config: str, project: Path, overrides: Any
) -> None:
    """A tree with no Python file left to scan never passes as "0 files, no findings"."""
    _write(project, files)
    if config:
        _write(project, {"pyproject.toml": config})
    run = overrides(".")
    assert run.exit_code == 2, run.out + run.err
    assert "no Python file to check" in run.err and "--allow-empty" in run.err
    assert len(run.err.strip().splitlines()) == 1, run.err
    assert overrides("--allow-empty", ".").exit_code == 0


def test_a_changed_file_run_with_nothing_left_still_passes(project: Path, overrides: Any) -> None:
    """The pre-commit hook on an excluded file: nothing to check is the right answer there."""
    _write(
        project,
        {"a.py": "x = 1\n", "pyproject.toml": '[tool.harness.overrides]\nexclude = ["*"]\n'},
    )
    assert overrides("--changed", "a.py").exit_code == 0


def test_a_deleted_working_directory_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overrides: Any
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    run = overrides(str(tmp_path))
    assert run.exit_code == 2
    assert "the working directory no longer exists" in run.err
    assert len(run.err.strip().splitlines()) == 1, run.err
