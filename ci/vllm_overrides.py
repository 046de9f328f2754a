"""vLLM's static CI step: the override checker on the vLLM that ``import vllm`` resolves to.

vLLM's test image installs vllm into site-packages and moves the checkout's ``vllm/`` out of the
way (``src/vllm``; ``test_docs/vllm`` in older images), so a hard-coded ``vllm`` directory is not
there. This script finds the package where ``python3 -c 'import vllm'`` in the working directory
would import it from, without importing it (:func:`importlib.util.find_spec` of a top-level
name runs no package code), or takes ``--vllm PATH`` (the package directory, or a directory
holding ``vllm/``), and runs ``harness overrides`` on it from this checkout: the checker needs
only the standard library, so nothing is installed into the image.

``--since REF`` reports only the findings the tree adds to the ``vllm/`` of REF in the git
repository holding the working directory (``--repo DIR`` names another);
``--since-merge-base BRANCH`` takes REF = ``git merge-base HEAD BRANCH``. REF's ``vllm/`` is
exported with ``git archive`` into a temporary directory (the repository is not touched), its
findings are written as a baseline, and the tree is checked against that baseline: findings are
matched by rule, severity, class, method and parameters (``harness overrides --baseline``), and
file-level ones by path, so both trees are checked from their parent directory as ``vllm``: the
paths printed are the repository's (``vllm/v1/...``) wherever the package is installed.

Usage: ``python3 ci/vllm_overrides.py [--vllm PATH] [--since REF | --since-merge-base BRANCH]
[--repo DIR] [-- ARGS for harness overrides]``. The exit status is the checker's: 0 nothing
blocks, 1 a blocking finding, 2 a usage error (one line: no vLLM found, no git, no such REF).
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""This checkout: ``harness`` is imported from here by the checker's process."""

PACKAGE = "vllm"
EXIT_USAGE = 2


class StepError(Exception):
    """A usage error of the step: reported as one line, exit 2."""


def _import_path() -> list[str]:
    """``sys.path`` as ``python3 -c 'import vllm'`` has it in the working directory: without
    this script's directory (``ci/``, whose ``vllm/`` of step files is a namespace package) and
    with the working directory first (unless ``-P`` or ``PYTHONSAFEPATH`` leaves it out)."""
    here = Path(__file__).resolve().parent
    path = [p for p in sys.path if not p or Path(p).resolve() != here]
    if not getattr(sys.flags, "safe_path", False) and (not path or path[0] != ""):
        path.insert(0, "")
    return path


def vllm_directory(given: str | None) -> tuple[Path, str]:
    """The vllm package directory to check and how it was found.

    ``given``: the package directory itself, or a directory holding ``vllm/`` (a checkout).
    Otherwise the package ``import vllm`` would load here (:func:`_import_path`); a namespace
    package (a ``vllm/`` without ``__init__.py``) or a plain module is not vLLM and is an error.
    """
    if given is not None:
        path = Path(given)
        for candidate in (path / PACKAGE, path):
            if (candidate / "__init__.py").is_file():
                return candidate.resolve(), f"--vllm {given}"
        raise StepError(f"--vllm {given}: neither a vllm package nor a directory holding one")
    saved = sys.path[:]
    sys.path[:] = _import_path()
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except Exception as exc:  # a broken finder (an editable install's) or sys.modules entry
        raise StepError(f"cannot look up the vllm package: {exc}") from None
    finally:
        sys.path[:] = saved
    if spec is None:
        raise StepError("import vllm finds nothing here: install vLLM, or pass --vllm PATH")
    origin = spec.origin
    if not spec.submodule_search_locations or origin is None or not origin.endswith(".py"):
        where = ", ".join(spec.submodule_search_locations or []) or origin
        raise StepError(f"import vllm finds no regular package (at {where}): pass --vllm PATH")
    return Path(origin).resolve().parent, "import vllm"


GIT = ("git", "-c", "safe.directory=*")
"""git, trusting the repository it is pointed at: in a container the build's checkout belongs to
another user, which git otherwise refuses ("dubious ownership")."""


def _git(repo: Path, *argv: str) -> str:
    try:
        done = subprocess.run(
            [*GIT, "-C", str(repo), *argv], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise StepError("--since needs git, which is not installed") from None
    if done.returncode != 0:
        said = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
        raise StepError(f"git {' '.join(argv)}: {said[-1]}")
    return done.stdout.strip()


def base_commit(repo: Path, since: str | None, merge_base: str | None) -> str:
    """The commit whose ``vllm/`` the tree is compared with."""
    ref = since if merge_base is None else merge_base
    option = "--since" if merge_base is None else "--since-merge-base"
    assert ref is not None
    try:
        commit = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except StepError:
        raise StepError(f"{option} {ref}: no such commit in {repo}") from None
    if merge_base is None:
        return commit
    try:
        return _git(repo, "merge-base", "HEAD", commit)
    except StepError:  # git says nothing, exit 1
        raise StepError(
            f"{option} {ref}: HEAD and {ref} have no common commit in {repo} "
            "(a shallow clone: fetch more of their history)"
        ) from None


def export_package(repo: Path, commit: str, target: Path) -> Path:
    """Write ``commit``'s ``vllm/`` under ``target`` (``git archive``); returns its directory."""
    try:
        tar = subprocess.run(
            [*GIT, "-C", str(repo), "archive", "--format=tar", commit, PACKAGE],
            capture_output=True,
            check=False,
        )
    except FileNotFoundError:
        raise StepError("--since needs git, which is not installed") from None
    if tar.returncode != 0:
        raise StepError(f"{commit[:12]} has no {PACKAGE}/ at the top of {repo}")
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as archive:
        if hasattr(tarfile, "data_filter"):  # every Python since 3.12, and 3.10.12/3.11.4 on
            archive.extractall(target, filter="data")
        else:  # pragma: no cover - an older 3.10/3.11 patch release
            archive.extractall(target)
    return target / PACKAGE


_CHECKER = """\
import runpy, sys
root = sys.argv.pop(1)
if not getattr(sys.flags, "safe_path", False):
    del sys.path[0]
sys.path.insert(0, root)
runpy.run_module("harness.overrides", run_name="__main__", alter_sys=True)
"""
"""``python -c`` this and this checkout's root: ``python -m harness.overrides`` without the
working directory on ``sys.path`` (``-m`` puts it first, and there it is the tree's parent, the
image's site-packages, which may hold another ``harness``)."""


def checker(tree: Path, *argv: str) -> int:
    """Run ``harness overrides argv`` on ``tree`` from this checkout, in the tree's parent
    directory (the findings name ``vllm/...``); its exit status. No cache is written: the tree's
    parent may be the image's site-packages."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-c", _CHECKER, str(ROOT), "--no-cache", *argv, tree.name]
    return subprocess.run(command, env=env, cwd=tree.parent, check=False).returncode


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ci/vllm_overrides.py",
        description="harness overrides on the vLLM that import vllm resolves to (or --vllm).",
    )
    parser.add_argument("--vllm", metavar="PATH", help="check this vllm package (or checkout)")
    since = parser.add_mutually_exclusive_group()
    since.add_argument("--since", metavar="REF", help="only the findings added to REF's vllm/")
    since.add_argument(
        "--since-merge-base",
        metavar="BRANCH",
        help="only the findings added to the vllm/ of git merge-base HEAD BRANCH",
    )
    parser.add_argument(
        "--repo", metavar="DIR", help="the git repository of --since (default: the one here)"
    )
    parser.add_argument("args", nargs="*", help="more arguments for harness overrides (after --)")
    return parser


def main(argv: Sequence[str]) -> int:
    """Find vLLM, say where, and check it (against REF's findings with ``--since``)."""
    args = _parser().parse_args(argv)
    try:
        tree, how = vllm_directory(args.vllm)
        print(f"ci/vllm_overrides.py: checking {tree} ({how})", file=sys.stderr, flush=True)
        if args.since is None and args.since_merge_base is None:
            return checker(tree, *args.args)
        if tree.name != PACKAGE:
            raise StepError(f"--since compares {PACKAGE}/ trees: {tree} is named {tree.name}")
        repo = Path(_git(Path(args.repo or "."), "rev-parse", "--show-toplevel"))
        commit = base_commit(repo, args.since, args.since_merge_base)
        with tempfile.TemporaryDirectory(prefix="harness-vllm-base-") as tmp:
            base = export_package(repo, commit, Path(tmp) / "base")
            baseline = Path(tmp) / "base-findings.json"
            print(
                f"ci/vllm_overrides.py: only the findings added to {commit[:12]}'s {PACKAGE}/ "
                f"in {repo}",
                file=sys.stderr,
                flush=True,
            )
            written = checker(base, *args.args, "--write-baseline", str(baseline))
            if written != 0:
                return written
            # Base findings the tree no longer has are stale entries of a temporary file: not
            # news for the pull request, so HO303 is not reported.
            return checker(tree, *args.args, "--baseline", str(baseline), "--ignore", "HO303")
    except StepError as exc:
        print(f"ci/vllm_overrides.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
