"""Install this package beside what an environment already holds (vLLM's image), moving nothing.

vLLM's GPU step runs in vLLM's docker image: its torch, flashinfer-python, numpy (and often
lm-eval and pytest) are what the step is meant to test, so they must stay as they are. For each
requirement of the EXTRAS asked for (read from this checkout's ``pyproject.toml``, following the
extras' references to each other) and of the base install:

- installed at a version the range admits: kept;
- installed at a version the range excludes: one line naming both, exit 1, nothing installed;
- not installed: installed by pip with every distribution already there pinned to its installed
  version (``-c``), so that pip can add but never move; when it cannot, one line, exit 1.

Then this package itself, ``pip install --no-deps``. Usage:
``python3 ci/install_beside.py EXTRAS`` (comma-separated, e.g. ``gpu,eval,test``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROG = "ci/install_beside.py"

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]
"""How pip is run (a test passes its own)."""


class BesideError(Exception):
    """Why the install cannot go ahead: one line, exit 1."""


def _requirement(line: str) -> Requirement:
    try:
        from packaging.requirements import Requirement
    except ModuleNotFoundError:
        raise BesideError("needs the packaging distribution, which is not installed") from None
    return Requirement(line)


def _project() -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 (vLLM's images run 3.12)
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise BesideError("Python 3.10 needs tomli to read pyproject.toml") from None
    project: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


def requirements(project: dict[str, Any], extras: Sequence[str]) -> list[Requirement]:
    """The requirements of the base install and of ``extras``, with the project's references
    to its own extras followed and markers evaluated here."""
    name = project["name"]
    table: dict[str, list[str]] = project.get("optional-dependencies", {})
    out: list[Requirement] = []
    seen: set[str] = set(extras)
    pending: list[tuple[str, str | None]] = [(line, None) for line in project["dependencies"]]
    for asked in extras:
        if asked not in table:
            raise BesideError(f"{name} has no extra {asked!r} (it has {', '.join(sorted(table))})")
        pending += [(line, asked) for line in table[asked]]
    while pending:
        line, extra = pending.pop(0)
        requirement = _requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate(
            {"extra": extra or ""}
        ):
            continue
        if requirement.name == name:
            for more in sorted(requirement.extras - seen):
                seen.add(more)
                pending += [(x, more) for x in table[more]]
            continue
        out.append(requirement)
    return out


def installed_version(name: str) -> str | None:
    """The installed version of distribution ``name``, or ``None``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass
class Plan:
    """What installing beside this environment means, requirement by requirement."""

    kept: list[str] = field(default_factory=list[str])
    """``name version`` of each requirement the environment already meets."""
    missing: list[str] = field(default_factory=list[str])
    """The requirements (as written) of what is not installed."""
    conflicts: list[str] = field(default_factory=list[str])
    """``name version (wanted: SPEC)`` of each installed version a range excludes."""


def plan(wanted: Iterable[Requirement], version_of: Callable[[str], str | None]) -> Plan:
    """Sort ``wanted`` by what the environment (``version_of``) holds."""
    result = Plan()
    for requirement in wanted:
        version = version_of(requirement.name)
        if version is None:
            result.missing.append(str(requirement))
        elif requirement.specifier.contains(version, prereleases=True):
            result.kept.append(f"{requirement.name} {version}")
        else:
            result.conflicts.append(f"{requirement.name} {version} (wanted: {requirement})")
    return result


def frozen(dists: Iterable[importlib.metadata.Distribution] | None = None) -> list[str]:
    """A pip ``-c`` line for every distribution installed here (``dists``: those found on
    ``sys.path``), the first of each project (as ``importlib.metadata.version`` finds it) under
    its normalized name: ``name==version``, or ``name===version`` for a version PEP 440 cannot
    parse (current pip refuses the whole file on ``==`` with one)."""
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    pins: dict[str, str] = {}
    for dist in importlib.metadata.distributions() if dists is None else dists:
        name: str | None = dist.metadata["Name"]  # None: a broken .dist-info
        if name and dist.version:
            pins.setdefault(canonicalize_name(name), dist.version)
    lines: list[str] = []
    for name, version in sorted(pins.items()):
        try:
            Version(version)
        except InvalidVersion:
            lines.append(f"{name}==={version}")
        else:
            lines.append(f"{name}=={version}")
    return lines


def _pip(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("pip") is None:
        raise BesideError(
            f"{sys.executable} has no pip (python3 -m ensurepip adds it): nothing was installed"
        )
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *argv]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def _last_error(done: subprocess.CompletedProcess[str]) -> str:
    lines = [x for x in (done.stderr or done.stdout).splitlines() if x.strip()]
    errors = [x for x in lines if x.startswith("ERROR")]
    return (errors or lines or [f"pip exited {done.returncode}"])[-1].strip()


def install(extras: Sequence[str], run: Runner | None = None) -> Plan:
    """Install what ``extras`` lack beside what is here, then this package ``--no-deps``
    (``run``: how pip runs; default this interpreter's)."""
    run = run or _pip
    wanted = requirements(_project(), extras)
    result = plan(wanted, installed_version)
    if result.conflicts:
        raise BesideError(
            f"this environment's {'; '.join(result.conflicts)}: harness does not move it "
            "(nothing was installed)"
        )
    if result.missing:
        with tempfile.TemporaryDirectory(prefix="install-beside-") as tmp:
            pins = Path(tmp) / "installed.txt"
            pins.write_text("\n".join(frozen()) + "\n")
            done = run(["install", "-q", "-c", str(pins), *result.missing])
        if done.returncode != 0:
            raise BesideError(
                f"pip cannot add {', '.join(result.missing)} without moving what is installed: "
                + _last_error(done)
            )
    done = run(["install", "-q", "--no-deps", str(ROOT)])
    if done.returncode != 0:
        raise BesideError(f"pip install --no-deps {ROOT} failed: {_last_error(done)}")
    return result


def main(argv: Sequence[str]) -> int:
    """``install_beside.py EXTRAS``: 0 installed, 1 refused (one line), 2 a usage error."""
    if len(argv) != 1 or argv[0].startswith("-"):
        print(
            f"usage: python3 {PROG} EXTRAS (comma-separated, e.g. gpu,eval,test)", file=sys.stderr
        )
        return 2
    extras = [e.strip() for e in argv[0].split(",") if e.strip()]
    try:
        result = install(extras)
    except BesideError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    print(f"{PROG}: kept {', '.join(result.kept) or 'nothing'}", file=sys.stderr)
    print(f"{PROG}: added {', '.join(result.missing) or 'nothing'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
