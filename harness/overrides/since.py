"""``harness overrides --since REF``: report only the findings HEAD adds relative to REF.

REF's tree is exported with ``git archive`` into a temporary directory (the checkout is never
touched), checked with the same options and cached by tree hash. Findings match as baselines do;
a file git sees renamed keeps REF's findings.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from collections.abc import Sequence

from harness.errors import HarnessError
from harness.overrides.baseline import filter_new, key
from harness.overrides.cache import (
    code_version,
    digest,
    framed_path,
    is_hex,
    prune_oldest,
    read_framed,
    user_cache_directory,
    write_framed,
)
from harness.overrides.checker import CheckOptions, CheckResult, check
from harness.overrides.config import settings
from harness.overrides.findings import Finding

_KEEP = 64
"""REF results the cache keeps, the most recently used."""


def _git(root: str, *argv: str, failure: str | None = None) -> bytes:
    """What ``git -C root argv...`` prints; ``failure`` (default: git's last error line) as
    the error when it fails."""
    try:
        done = subprocess.run(["git", "-C", root, *argv], capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise HarnessError("--since needs git, which is not installed") from exc
    if done.returncode != 0:
        said = os.fsdecode(done.stderr).strip().splitlines() or ["git failed"]
        raise HarnessError(failure or said[-1])
    return done.stdout


def resolve(root: str, ref: str) -> tuple[str, str]:
    """``(commit, tree)`` hashes of ``ref``; a one-line error when it names no commit."""
    if ref.startswith("-"):
        raise HarnessError(f"--since {ref}: not a git revision")
    failure = f"--since {ref}: no such commit in {root}"
    commit = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", failure=failure)
    tree = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{tree}}", failure=failure)
    return commit.decode().strip(), tree.decode().strip()


def export(root: str, commit: str, target: str) -> None:
    """Write ``commit``'s tree into ``target`` (``git archive``: nothing in ``root`` changes)."""
    failure = f"--since: git archive {commit[:12]} failed"
    tar = _git(root, "archive", "--format=tar", commit, failure=failure)
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        if sys.version_info >= (3, 12) or hasattr(tarfile, "data_filter"):
            archive.extractall(target, filter="data")
        else:  # pragma: no cover - Python 3.10/3.11 without the backported filter
            archive.extractall(target)


def renames(root: str, commit: str) -> dict[str, str]:
    """Old path -> new path (relative to ``root``) of the files git finds renamed between
    ``commit`` and the working tree (staged or committed moves; git's rename detection)."""
    said = _git(root, "diff", "--no-ext-diff", "--find-renames", "--name-status", "-z", commit)
    fields = iter(os.fsdecode(said).split("\0")[:-1])  # status, path[, new path], ...
    moved: dict[str, str] = {}
    for status, path in zip(fields, fields, strict=False):
        if status[:1] in ("R", "C"):  # a rename or copy: the new path follows
            new = next(fields, path)
            if status[:1] == "R":
                moved[path] = new
    return moved


def _module_of(path: str, class_name: str) -> str | None:
    """The module part of ``class_name`` for a class written in ``path``: the longest tail of
    the path's folders and stem that prefixes the name (``pkg.fi`` for ``src/pkg/fi.py``)."""
    parts = os.path.splitext(path)[0].replace(os.sep, "/").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    for start in range(len(parts)):
        module = ".".join(parts[start:])
        if class_name.startswith(f"{module}."):
            return module
    return None


def _moved_keys(
    ref: list[tuple[str, str, str | None]],
    moved: dict[str, str],
    head: Sequence[Finding],
    here: str,
) -> Counter[str]:
    """REF's keys, those of findings in renamed files read as the new file's: the module
    prefix of the class HEAD's findings in that file give, or the path of a file-level one."""
    modules: dict[str, str] = {}
    for finding in head:
        path = os.path.normpath(os.path.join(here, finding.path))
        module = None if finding.class_name is None else _module_of(path, finding.class_name)
        if module is not None:
            modules[path] = module
    keys: Counter[str] = Counter()
    for entry, path, class_name in ref:
        new = moved.get(path)
        if new is not None and class_name is not None:
            old_module, new_module = _module_of(path, class_name), modules.get(new)
            if old_module is not None and new_module is not None:
                renamed = new_module + class_name[len(old_module) :]
                entry = entry.replace(f":{class_name}", f":{renamed}", 1)
        elif new is not None:
            shown, now = os.path.relpath(path, here), os.path.relpath(new, here)
            entry = entry.replace(f":{shown}:", f":{now}:", 1)
        keys[entry] += 1
    return keys


def _is_entry(entry: os.DirEntry[str], suffix: str) -> bool:
    """Whether ``entry`` is a file this module names ``<tree hash>-<16 hex digits><suffix>``."""
    tree, _, key = entry.name.removesuffix(suffix).rpartition("-")
    named = entry.name.endswith(suffix) and is_hex(tree, 40, 64) and is_hex(key, 16)
    return named and entry.is_file(follow_symlinks=False)


def _prune(directory: str) -> None:
    """Keep the ``_KEEP`` most recently used entries, and remove the files of the JSON format
    before them (``since/*.json``, no longer read)."""
    prune_oldest(os.path.dirname(framed_path(directory, "")), _KEEP, lambda e: _is_entry(e, ".bin"))
    prune_oldest(directory, 0, lambda e: _is_entry(e, ".json"))


def added_since(
    result: CheckResult,
    ref: str,
    paths: Sequence[str],
    options: CheckOptions,
    args: argparse.Namespace,
) -> CheckResult:
    """``result`` less the findings REF's tree already had for ``paths`` (those of files renamed
    since REF read as the new files'); says how many on standard error."""
    cwd = options.cwd or os.getcwd()
    try:
        root = os.fsdecode(_git(cwd, "rev-parse", "--show-toplevel")).strip()
    except HarnessError as exc:
        raise HarnessError(f"--since needs a git repository: {exc}") from None
    commit, tree = resolve(root, ref)
    real_root, given = os.path.realpath(root), list(paths) or ["."]
    here = os.path.relpath(os.path.realpath(cwd), real_root)
    relative = [os.path.relpath(os.path.realpath(os.path.join(cwd, p)), real_root) for p in given]
    outside = [p for p, r in zip(given, relative, strict=True) if r.split(os.sep)[0] == os.pardir]
    if outside or here.split(os.sep)[0] == os.pardir:
        raise HarnessError(f"--since: {(outside or [cwd])[0]} is outside the repository {root}")
    flags = [getattr(args, n) for n in ("exclude", "extend_exclude", "config", "isolated")]
    rules = [sorted(options.select), sorted(options.ignore)]
    fingerprint = json.dumps([here, relative, *rules, *flags])
    directory = None if options.cache_dir is None else user_cache_directory("since")  # by tree
    name = f"{tree}-{digest(fingerprint.encode())[:16]}.bin"
    header = ("harness-overrides-since", sys.version, code_version())
    rows = None
    if directory is not None:
        rows = read_framed(directory, name, header, lambda payload: isinstance(payload, list))
    if rows is None:
        with tempfile.TemporaryDirectory(prefix="harness-since-") as tmp:
            export(root, commit, tmp)
            ref_cwd = os.path.normpath(os.path.join(tmp, here))
            os.makedirs(ref_cwd, exist_ok=True)
            joined = [os.path.join(tmp, r) for r in relative]
            ref_paths = [os.path.normpath(p) for p in joined if os.path.exists(p)]
            _, excluder = settings(ref_paths, ref_cwd, args)  # REF's own configuration
            ref_options = dataclasses.replace(
                options, cache_dir=None, baseline=None, cwd=ref_cwd, excluder=excluder
            )
            found = check(ref_paths, options=ref_options).findings if ref_paths else []
        rows = [(key(f), os.path.normpath(os.path.join(here, f.path)), f.class_name) for f in found]
        if directory is not None:  # the framed cache file: ``(key, path, class)`` per finding
            write_framed(directory, name, header, rows)
            _prune(directory)
    elif directory is not None:
        with contextlib.suppress(OSError):
            os.utime(framed_path(directory, name))  # used now: the last to be pruned
    keys = _moved_keys(rows, renames(root, commit), result.findings, here)
    added = filter_new(result.findings, keys)
    hidden = len(result.findings) - len(added)
    print(
        f"harness overrides: --since {ref} ({commit[:12]}): {len(added)} finding(s) added, "
        f"{hidden} already at {ref} not shown",
        file=sys.stderr,
    )
    return dataclasses.replace(result, findings=added)
