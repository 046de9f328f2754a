"""The tiers stay honest: what the fast tier (``make test``) may not do, read from the suites' code.

A test outside the ``integration`` tier may not run ``make``, ``pip`` or ``pre-commit`` (in a
scope that starts a process or runs a program, however ``subprocess``/``os``/``runpy`` are
imported: a string that names one, or a word of a command line a process call is given), may not
open a network connection (``urlopen``,
``create_connection``, ``requests``/``httpx`` calls), and no test at all may assert on the wall
clock (an ``assert`` that reads ``time.perf_counter``/``time``/``monotonic``, directly or through
a name assigned from one). One test lists every offender; ``suites/conftest.py`` also refuses
non-loopback connections at run time in the fast tier.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from suites.signal_support import with_sigint

SUITES = Path(__file__).resolve().parent
NESTED_TOOLS = frozenset({"make", "pip", "pip3", "pre-commit", "pre_commit"})
NETWORK_CALLS = ("urlopen", "urlretrieve", "create_connection", "requests.", "httpx.")
PROCESS_CALLS = frozenset(
    {
        f"subprocess.{name}"
        for name in ("run", "Popen", "call", "check_call", "check_output", "getoutput")
    }
    | {f"os.{name}" for name in ("system", "popen", "posix_spawn", "posix_spawnp")}
    | {f"os.exec{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")}
    | {f"os.spawn{suffix}" for suffix in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")}
    | {"asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell"}
    | {"runpy.run_module", "runpy.run_path"}  # a program run in this process: pip's, say
    | {"pytester.run", "pytester.popen"}
)
CLOCKS = frozenset({"perf_counter", "time", "monotonic", "perf_counter_ns", "monotonic_ns"})

KNOWN_OFFENDERS = frozenset(
    {
        # Runs a fake `make` put first on PATH, which records its arguments: no nested build.
        "test_ci_configs.py: test_the_override_step_runs_since_the_merge_base_on_pull_requests "
        "runs make outside the integration tier",
    }
)


@dataclass(frozen=True)
class Scope:
    """A function (or the module's own code) and whether it runs in the integration tier."""

    name: str
    node: ast.AST
    integration: bool
    params: frozenset[str] = frozenset()
    """The function's parameters: the fixtures a test asks for by name."""


def _is_integration_mark(node: ast.expr) -> bool:
    """``pytest.mark.integration`` (or a call of it), alone or in a list, not in a param."""
    if isinstance(node, ast.Call):
        return _is_integration_mark(node.func)
    if isinstance(node, ast.List | ast.Tuple):
        return any(_is_integration_mark(e) for e in node.elts)
    return isinstance(node, ast.Attribute) and ast.unparse(node).endswith("mark.integration")


def _scopes(tree: ast.Module) -> Iterator[Scope]:
    module_mark = any(
        isinstance(stmt, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets)
        and _is_integration_mark(stmt.value)
        for stmt in tree.body
    )
    yield Scope("<module>", ast.Module([s for s in tree.body if not _is_def(s)], []), module_mark)

    def visit(body: list[ast.stmt], inherited: bool) -> Iterator[Scope]:
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                marked = inherited or any(_is_integration_mark(d) for d in stmt.decorator_list)
                yield from visit(stmt.body, marked)
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                marked = inherited or any(_is_integration_mark(d) for d in stmt.decorator_list)
                params = frozenset(a.arg for a in stmt.args.args + stmt.args.kwonlyargs)
                body = ast.Module(stmt.body, [])  # not its decorators
                yield Scope(stmt.name, body, marked, params)

    yield from _only_used_by_integration(list(visit(tree.body, module_mark)))


def _only_used_by_integration(scopes: list[Scope]) -> Iterator[Scope]:
    """A helper or fixture (not a ``test_`` function) that only integration scopes use, by name
    or as a fixture argument, belongs to the integration tier too."""
    uses = {scope.name: _names_used(scope.node) | scope.params for scope in scopes}
    integration = {s.name for s in scopes if s.integration}
    while True:
        found = {
            s.name
            for s in scopes
            if not s.name.startswith("test_")
            and s.name != "<module>"
            and (users := {n for n, used in uses.items() if s.name in used and n != s.name})
            and users <= integration
        }
        if found <= integration:
            break
        integration |= found
    for scope in scopes:
        yield Scope(scope.name, scope.node, scope.name in integration, scope.params)


def _names_used(node: ast.AST) -> set[str]:
    """The names a scope reads (calls, references, decorators of nested functions)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _is_def(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)


def _strings(node: ast.AST, constants: dict[str, list[str]]) -> Iterator[str]:
    """String constants in ``node``, and in the module constants its names refer to."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value
        elif isinstance(sub, ast.Name) and sub.id in constants:
            yield from constants[sub.id]


def _module_constants(tree: ast.Module) -> dict[str, list[str]]:
    constants: dict[str, list[str]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            values = [
                n.value
                for n in ast.walk(stmt.value)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ]
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = values
    return constants


def _clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    owner, _, name = _dotted(node.func).rpartition(".")
    return (name in CLOCKS and owner.split(".")[-1] in ("time", "")) and (owner or name != "time")


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for a name or an attribute chain (else "")."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value)
        return f"{owner}.{node.attr}" if owner else node.attr
    return ""


def _aliases(tree: ast.Module) -> dict[str, str]:
    """What the module's imports bind: ``sp`` -> ``subprocess``, ``run`` -> ``subprocess.run``."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname})
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            aliases.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    return aliases


def _target(call: ast.Call, aliases: dict[str, str]) -> str:
    """The dotted name ``call`` calls, its first part read through the module's imports."""
    first, dot, rest = _dotted(call.func).partition(".")
    return f"{aliases.get(first, first)}{dot}{rest}"


def _process_calls(
    node: ast.AST, helpers: frozenset[str], aliases: dict[str, str]
) -> Iterator[ast.Call]:
    """The calls in ``node`` that start a process (:data:`PROCESS_CALLS`, however imported) or
    call a function of the module that does."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            target = _target(call, aliases)
            if target in PROCESS_CALLS or target in helpers:
                yield call


def _process_helpers(tree: ast.Module, aliases: dict[str, str]) -> frozenset[str]:
    """The module's functions that start processes, directly or through one another."""
    defs = {s.name: s for s in ast.walk(tree) if isinstance(s, ast.FunctionDef)}
    helpers: frozenset[str] = frozenset()
    while True:
        found = frozenset(n for n, d in defs.items() if any(_process_calls(d, helpers, aliases)))
        if found == helpers:
            return helpers
        helpers = found


def _command_words(
    calls: list[ast.Call], scope: ast.AST, constants: dict[str, list[str]]
) -> Iterator[str]:
    """The words of the strings a process call is given, directly or through a name assigned in
    the scope or the module (a shell line, an f-string's text, ``bash -c '...'``)."""
    names = dict(constants)
    for assign in ast.walk(scope):
        if isinstance(assign, ast.Assign):
            for target in assign.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = list(_strings(assign.value, {}))
    for call in calls:
        for argument in [*call.args, *(k.value for k in call.keywords)]:
            for text in _strings(argument, names):
                yield from re.split(r"[\s'\";&|()]+", text)


def _offences(
    scope: Scope,
    constants: dict[str, list[str]],
    helpers: frozenset[str],
    aliases: dict[str, str],
) -> Iterator[str]:
    if not scope.integration:
        calls = list(_process_calls(scope.node, helpers, aliases))
        if calls:
            texts = [
                *_strings(scope.node, constants),
                *_command_words(calls, scope.node, constants),
            ]
            tools = {_tool(s) for s in texts}
            for tool in sorted(t for t in tools if t is not None):
                yield f"runs {tool} outside the integration tier"
        for call in ast.walk(scope.node):
            target = _dotted(call.func) if isinstance(call, ast.Call) else ""
            if target and any(marker in target for marker in NETWORK_CALLS):
                yield f"opens a network connection ({target}) outside the integration tier"
    timers = _timers(scope.node)
    for node in ast.walk(scope.node):
        if isinstance(node, ast.Assert) and any(
            _clock_call(n) or (isinstance(n, ast.Name) and n.id in timers)
            for n in ast.walk(node.test)
        ):
            yield "asserts on the wall clock"
            break


def _timers(node: ast.AST) -> set[str]:
    """Names that hold a clock reading or a difference of them (``started``, ``elapsed``)."""
    assigns = [n for n in ast.walk(node) if isinstance(n, ast.Assign)]
    timers: set[str] = set()
    while True:
        found = {
            target.id
            for assign in assigns
            if any(
                _clock_call(n) or (isinstance(n, ast.Name) and n.id in timers)
                for n in ast.walk(assign.value)
            )
            for target in assign.targets
            if isinstance(target, ast.Name)
        }
        if found <= timers:
            return timers
        timers |= found


def _tool(text: str) -> str | None:
    """The nested tool ``text`` names: ``make``, ``.../pip``, ``pre-commit`` (else None)."""
    name = text.rsplit("/", 1)[-1]
    return name.replace("_", "-").replace("pip3", "pip") if name in NESTED_TOOLS else None


def tier_offences(path: Path, root: Path = SUITES) -> list[str]:
    """Every breach of the tier rules in one test module (module docstring)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases = _aliases(tree)
    constants, helpers = _module_constants(tree), _process_helpers(tree, aliases)
    where = path.relative_to(root).as_posix()
    return sorted(
        {
            f"{where}: {scope.name} {offence}"
            for scope in _scopes(tree)
            for offence in _offences(scope, constants, helpers, aliases)
        }
    )


def _modules() -> list[Path]:
    """Every module of the suites but fixtures, and this one (its own example breaks the rules)."""
    return sorted(
        p
        for p in SUITES.rglob("*.py")
        if "fixtures" not in p.relative_to(SUITES).parts and p != Path(__file__).resolve()
    )


def test_the_tiers_are_kept() -> None:
    found = {offence for path in _modules() for offence in tier_offences(path)}
    new = sorted(found - KNOWN_OFFENDERS)
    fixed = sorted(KNOWN_OFFENDERS - found)
    assert not new, "mark these integration, or take the slow part out:\n" + "\n".join(new)
    assert not fixed, "no longer offend: delete them from KNOWN_OFFENDERS\n" + "\n".join(fixed)


FAST_MODULE = """
import subprocess, sys, time
from pathlib import Path
from urllib.request import urlopen

import pytest

HOOK = ["pre-commit", "run"]


def test_make():
    subprocess.run(["make", "-C", "x", "test-gpu"], check=True)


def test_pip():
    subprocess.run([sys.executable, "-m", "pip", "install", "x"], check=True)


def test_hook_by_constant():
    subprocess.run(HOOK, check=True)


def run(*argv):
    return subprocess.run(argv, check=True)


def test_venv_pip(tmp_path):
    run(Path(tmp_path, "bin", "pip"))


def test_network():
    urlopen("https://pypi.org/simple/")


def test_clock():
    started = time.perf_counter()
    assert time.perf_counter() - started < 10


def test_clock_through_a_name():
    started = time.monotonic()
    elapsed = time.monotonic() - started
    assert elapsed < 10


@pytest.mark.integration
def test_slow_tier_may():
    subprocess.run(["make", "test"], check=True)
    urlopen("https://pypi.org/simple/")


@pytest.mark.integration
def test_but_never_the_clock():
    assert time.monotonic() > 0


@pytest.mark.parametrize("x", [pytest.param(1, marks=pytest.mark.integration)])
def test_a_param_is_not_the_whole_test(x):
    subprocess.run(["make"])


def test_fine():
    assert "pip install" in "run pip install x"
    assert "make" not in {}  # a word, and no process started


def test_fine_too():
    subprocess.run(["git", "status"], check=True)
"""


def test_the_tier_rules_bite(tmp_path: Path) -> None:
    path = tmp_path / "test_x.py"
    path.write_text(FAST_MODULE, encoding="utf-8")
    assert tier_offences(path, tmp_path) == [
        "test_x.py: test_a_param_is_not_the_whole_test runs make outside the integration tier",
        "test_x.py: test_but_never_the_clock asserts on the wall clock",
        "test_x.py: test_clock asserts on the wall clock",
        "test_x.py: test_clock_through_a_name asserts on the wall clock",
        "test_x.py: test_hook_by_constant runs pre-commit outside the integration tier",
        "test_x.py: test_make runs make outside the integration tier",
        "test_x.py: test_network opens a network connection (urlopen) outside the integration tier",
        "test_x.py: test_pip runs pip outside the integration tier",
        "test_x.py: test_venv_pip runs pip outside the integration tier",
    ]
    module_wide = "import pytest\npytestmark = [pytest.mark.integration]\n" + FAST_MODULE
    path.write_text(module_wide, encoding="utf-8")
    assert [o for o in tier_offences(path, tmp_path) if "clock" not in o] == []


def test_the_fast_tier_refuses_the_network_and_keeps_this_machine() -> None:
    with socket.socket() as sock, pytest.raises(OSError, match="no network in the fast tier"):
        sock.connect(("192.0.2.1", 443))  # TEST-NET-1: refused before any packet leaves
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", 9)) != 0  # loopback is allowed (nothing listens)


SPELLINGS_MODULE = """
import asyncio, os, runpy, subprocess, sys
import subprocess as sp
from subprocess import check_call, run as launch


def test_shell_line():
    subprocess.run("pip install x", shell=True, check=True)


def test_f_string():
    os.system(f"{sys.executable} -m pip install x")


def test_imported_name():
    launch([sys.executable, "-m", "pip", "install", "x"])


def test_module_alias():
    sp.run(["make", "-C", "x"])


def test_imported_check_call():
    check_call(["bash", "-c", "pre-commit run --all-files"])


def test_local_command_line():
    line = "python3 -m pip download x"
    subprocess.run(line, shell=True)


def test_other_process_calls():
    os.popen("make test").read()
    asyncio.run(asyncio.create_subprocess_exec("pip", "install", "x"))


def test_in_process():
    runpy.run_module("pip", run_name="__main__")


def test_words_outside_the_call_are_not_commands():
    out = subprocess.run(["git", "status"], capture_output=True, text=True)
    assert "run pip install x" not in out.stdout
"""


def test_the_tier_rules_see_every_spelling_of_a_nested_tool(tmp_path: Path) -> None:
    path = tmp_path / "test_x.py"
    path.write_text(SPELLINGS_MODULE, encoding="utf-8")
    assert tier_offences(path, tmp_path) == [
        "test_x.py: test_f_string runs pip outside the integration tier",
        "test_x.py: test_imported_check_call runs pre-commit outside the integration tier",
        "test_x.py: test_imported_name runs pip outside the integration tier",
        "test_x.py: test_in_process runs pip outside the integration tier",
        "test_x.py: test_local_command_line runs pip outside the integration tier",
        "test_x.py: test_module_alias runs make outside the integration tier",
        "test_x.py: test_other_process_calls runs make outside the integration tier",
        "test_x.py: test_other_process_calls runs pip outside the integration tier",
        "test_x.py: test_shell_line runs pip outside the integration tier",
    ]


FAILURES_PLUGIN = """
import os


def pytest_runtest_logreport(report):
    if report.failed:
        with open(os.environ["FAILED_TESTS_FILE"], "a", encoding="utf-8") as out:
            out.write(report.nodeid + "\\n")
"""


@pytest.mark.integration
def test_the_fast_tier_passes_from_a_checkout_whose_path_holds_a_space_with_sigint_ignored(
    tmp_path: Path,
) -> None:
    """A checkout in ``/home/me/my projects/``: a test that writes ``exec {sys.executable}``
    into a shell script, or expects a printed command to hold the interpreter's path unquoted,
    passed only where the path has no space. And run as a background job of a shell without job
    control (``make test &`` in a script), which starts it with SIGINT ignored: a test that
    Ctrl-Cs a process without setting SIGINT's handler failed only there."""
    copy = tmp_path / "a checkout" / "harness"
    ignored = (".venv*", ".git", "__pycache__", ".*_cache", ".hypothesis", "reports", "*.egg-info")
    shutil.copytree(SUITES.parent, copy, ignore=shutil.ignore_patterns(*ignored))
    if (SUITES.parent / ".venv").is_dir():  # where make test runs from (a test reads its path)
        (copy / ".venv").symlink_to(SUITES.parent / ".venv")
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "failures_here.py").write_text(FAILURES_PLUGIN, encoding="utf-8")
    failed = tmp_path / "failed.txt"
    failed.touch()
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join([str(copy), str(tmp_path / "plugin")])  # copy's harness
    env["FAILED_TESTS_FILE"] = str(failed)
    fast = "not gpu and not integration"
    argv = [*with_sigint(signal.SIG_IGN), sys.executable, "-m", "pytest", "-p", "failures_here"]
    argv += ["-n", "2", "-q", "-m", fast]
    done = subprocess.run(
        [*argv, "-p", "no:cacheprovider", "suites"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    failures = sorted(set(failed.read_text(encoding="utf-8").split()))
    assert not failures, "fail from a path with a space, SIGINT ignored:\n" + "\n".join(failures)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
