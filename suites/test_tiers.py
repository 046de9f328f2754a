"""The tiers stay honest: what the fast tier (``make test``) may not do, read from the suites' code.

A test outside the ``integration`` tier may not run ``make``, ``pip`` or ``pre-commit`` (a name
of one as an argument of any call), may not open a network connection (``urlopen``,
``create_connection``, ``requests``/``httpx`` calls), and no test at all may assert on the wall
clock (an ``assert`` that reads ``time.perf_counter``/``time``/``monotonic``, directly or through
a name assigned from one). One test lists every offender; ``suites/conftest.py`` also refuses
non-loopback connections at run time in the fast tier.
"""

from __future__ import annotations

import ast
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SUITES = Path(__file__).resolve().parent
NESTED_TOOLS = frozenset({"make", "pip", "pip3", "pre-commit", "pre_commit"})
NETWORK_CALLS = ("urlopen", "urlretrieve", "create_connection", "requests.", "httpx.")
PROCESS_CALLS = frozenset(
    {f"subprocess.{name}" for name in ("run", "Popen", "call", "check_call", "check_output")}
    | {"os.system", "os.execv", "os.execvp", "os.execvpe", "pytester.run", "pytester.popen"}
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


def _starts_processes(node: ast.AST, helpers: frozenset[str]) -> bool:
    """``node`` starts a process: ``subprocess``, ``os.system``/``exec*``, ``pytester.run``, or
    a function of its module that does."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            target = _dotted(call.func)
            if target in PROCESS_CALLS or target in helpers:
                return True
    return False


def _process_helpers(tree: ast.Module) -> frozenset[str]:
    """The module's functions that start processes, directly or through one another."""
    defs = {s.name: s for s in ast.walk(tree) if isinstance(s, ast.FunctionDef)}
    helpers: frozenset[str] = frozenset()
    while True:
        found = frozenset(n for n, d in defs.items() if _starts_processes(d, helpers))
        if found == helpers:
            return helpers
        helpers = found


def _offences(
    scope: Scope, constants: dict[str, list[str]], helpers: frozenset[str]
) -> Iterator[str]:
    if not scope.integration:
        if _starts_processes(scope.node, helpers):
            tools = {_tool(s) for s in _strings(scope.node, constants)}
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
    constants, helpers = _module_constants(tree), _process_helpers(tree)
    where = path.relative_to(root).as_posix()
    return sorted(
        {
            f"{where}: {scope.name} {offence}"
            for scope in _scopes(tree)
            for offence in _offences(scope, constants, helpers)
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
