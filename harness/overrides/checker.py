"""Orchestration: discover, reuse a stored result or summarise (cached) and analyse, sort. Heavy
modules are imported only when no stored result can be reused.
"""

from __future__ import annotations

import functools
import gc
import importlib
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from harness import __version__
from harness.errors import HarnessError
from harness.overrides.cache import SCHEMA, Source, code_version, locate, read_sources
from harness.overrides.config import Excluder
from harness.overrides.discover import (
    SourceFile,
    Unreadable,
    discover,
    display_path,
    module_names,
    scanned_root,
)
from harness.overrides.findings import Finding, Severity
from harness.overrides.result_cache import ResultStore, fingerprint

if TYPE_CHECKING:
    from harness.overrides.baseline import StaleEntry
    from harness.overrides.external import Environment


@dataclass(frozen=True)
class CheckOptions:
    """Knobs of one check run."""

    select: frozenset[str] = frozenset()
    """Codes of optional rules to enable (``harness overrides --list-rules`` shows which)."""
    cache_dir: str | None = ""
    """Cache directory (relative to ``cwd``); ``""`` finds it as :func:`cache.locate` says;
    ``None`` disables caching."""
    jobs: int | None = None
    """Worker processes for parsing: at most the CPUs this process may use (``None``: up to 8)."""
    baseline: str | None = None
    """Baseline file: findings it lists are not reported."""
    cwd: str | None = None
    """Directory reported paths are relative to (default: the working directory)."""
    excluder: Excluder | None = None
    """What the walk leaves out (default: the built-in exclusions); also applied to the
    ``changed`` files."""
    ignore: frozenset[str] = frozenset()
    """Codes whose findings are not reported."""
    external: bool = True
    """Resolve bases outside the tree from the interpreter's installed packages and
    standard library (:mod:`harness.overrides.external`)."""
    python: str | None = None
    """The environment installed packages are read from (``--python``: an interpreter, a
    virtual environment or a directory of packages); ``None``: the standard library only."""
    roots: tuple[str, ...] = ()
    """Set by :func:`check`: the scanned paths (never searched as installed packages)."""


@dataclass
class Stats:
    """What a run looked at and how long it took."""

    files: int = 0
    parsed: int = 0
    classes: int = 0
    checked_classes: int = 0
    seconds: float = 0.0
    reused: bool = False
    """True when the stored result of an identical run on an unchanged tree was reused."""
    excluded: tuple[str, ...] = ()
    """Changed files left out because the configuration excludes them."""
    missing: tuple[str, ...] = ()
    """Changed paths that do not exist, as given: taken as deleted files (their subclasses
    are re-checked), and named on standard error in case they are typing mistakes."""
    external: tuple[tuple[str, str], ...] = ()
    """``(path, content hash)`` of the files read from outside the tree."""
    environment: str = ""
    """What the bases outside the tree were read from, in words."""


@dataclass
class CheckResult:
    """Findings (sorted) and run statistics."""

    findings: list[Finding] = field(default_factory=lambda: [])
    stats: Stats = field(default_factory=Stats)

    def failed(self, fail_on: Severity) -> bool:
        """True if any finding is at or above ``fail_on``."""
        return any(f.severity.rank >= fail_on.rank for f in self.findings)


def check(
    paths: Sequence[str],
    *,
    changed: Sequence[str] | None = None,
    options: CheckOptions = CheckOptions(),
) -> CheckResult:
    """Check the tree under ``paths``; with ``changed``, only what those files can affect."""
    enabled = gc.isenabled()
    gc.disable()  # tens of thousands of small tuples; cyclic GC only costs time here
    try:
        return _check(paths, changed, options)
    finally:
        if enabled:
            gc.enable()


def _check(
    paths: Sequence[str], changed: Sequence[str] | None, options: CheckOptions
) -> CheckResult:
    started = time.perf_counter()
    cwd = os.path.abspath(options.cwd or os.getcwd())
    roots = list(paths) or ["."]
    missing = tuple(p for p in changed or () if not os.path.lexists(p))
    present = [p for p in changed or () if p not in missing]
    ex = options.excluder  # a changed file the configuration excludes is left out
    excluded = tuple(
        p for p in present if ex is not None and ex.excluded_below(p, scanned_root(p, roots))
    )
    present = [p for p in present if p not in excluded]
    files, unreadable = discover([*roots, *present], cwd, options.excluder)
    changed_paths = None if changed is None else sorted(_changed_files(files, present))
    deleted = frozenset(name for p in missing for name in module_names(p, roots, cwd))
    cache_dir = locate(options.cache_dir, roots, cwd)
    env: Environment | None = None
    if options.external:  # where bases outside the tree are read from
        from harness.overrides.external import environment

        try:
            env = environment(options.python, cwd)
        except ValueError as exc:
            raise HarnessError(str(exc)) from None
    sources, unread = read_sources(files)
    unreadable = [*unreadable, *unread]
    key = fingerprint(
        __version__,
        sys.version,  # the grammar, and so what parses, is the interpreter's
        str(SCHEMA),
        code_version(),
        cwd,
        "\0".join(sorted(os.path.abspath(r) for r in roots)),
        None if changed_paths is None else "\0".join(changed_paths),
        "\0".join(sorted(deleted)),
        ",".join(sorted(options.select)),
        None if options.excluder is None else "\0".join(options.excluder.patterns),
        str(options.external),
        None if env is None else "\0".join((env.version, *env.search)),
    )
    print_ = fingerprint(  # names too: a symlink added elsewhere can add an import name
        tuple((s.file.display, s.hash, s.file.module, *s.file.aliases) for s in sources),
        tuple(f"{u.display}:{u.reason}" for u in unreadable),
    )
    store = ResultStore(cache_dir)
    findings = store.get(key, print_)
    stats = Stats(len(files), reused=findings is not None, excluded=excluded, missing=missing)
    stats.environment = "" if env is None else env.describe()
    if findings is None:
        options = replace(options, roots=tuple(roots))
        findings = _analyze(
            sources, unreadable, changed_paths, deleted, cache_dir, options, stats, env
        )
        store.put(key, print_, findings, stats.external)
    if options.baseline is not None:
        from harness.overrides import baseline as baseline_mod

        entries = baseline_mod.read(options.baseline)
        shown = display_path(options.baseline, cwd)
        stale = [] if changed is not None else baseline_mod.stale(shown, entries, findings)
        findings = baseline_mod.filter_new(findings, baseline_mod.keys(entries))
        findings.extend(_stale_findings(stale, options.select))
    if options.ignore:
        findings = [f for f in findings if f.code not in options.ignore]
    findings.sort(key=Finding.sort_key)
    stats.seconds = time.perf_counter() - started
    return CheckResult(findings, stats)


def _analyze(
    sources: Sequence[Source],
    unreadable: Sequence[Unreadable],
    changed: list[str] | None,
    deleted: frozenset[str],
    cache_dir: str | None,
    options: CheckOptions,
    stats: Stats,
    env: Environment | None = None,
) -> list[Finding]:
    from harness.overrides.cache import Cache, InstalledCache, load
    from harness.overrides.codec import CorruptSummary
    from harness.overrides.external import InstalledModules

    cache = Cache(cache_dir)
    files = [s.file for s in sources]
    external = None
    installed = InstalledCache(options.external and cache_dir is not None)
    if options.external:
        tree = {name.partition(".")[0] for f in files for name in (f.module, *f.aliases)}
        cwd = options.cwd or os.getcwd()
        local = [*options.roots, cwd]
        external = InstalledModules(
            installed,
            sorted(tree),
            local,
            import_roots=lambda: _naming_roots(sources),
            local_cache=cache,
            cwd=cwd,
            env=env,
        )
    summaries, stats.parsed = load(
        sources,
        cache,
        options.jobs,
        meanwhile=functools.partial(importlib.import_module, "harness.overrides.analysis"),
        ahead=None if external is None else external.read_ahead,
    )
    from harness.overrides.analysis import analyze

    try:
        findings, stats.classes, stats.checked_classes = analyze(
            files,
            summaries,
            unreadable,
            changed=None if changed is None else set(changed),
            select=options.select,
            deleted=deleted,
            external=external,
            sources={s.file.path: s.data for s in sources},
        )
    except CorruptSummary:  # a cached part decoded only now is broken: start again without
        Cache(cache_dir).clear()
        installed.clear()
        return _analyze(sources, unreadable, changed, deleted, None, options, stats, env)
    cache.save()
    if external is not None:
        stats.external = tuple(sorted(set(external.used)))
    return findings


def _naming_roots(sources: Sequence[Source]) -> list[str]:
    """The directories that name the scanned files: each file's path less its dotted name
    (``/p`` for ``/p/pkg/sub.py`` named ``pkg.sub``), most used first. Names that do not
    spell the end of the path (aliases through symlinked directories) give none."""
    counts: dict[str, int] = {}
    sep = os.sep
    for source in sources:
        file = source.file
        head, tail = os.path.split(file.path)
        full = head if file.is_package else f"{head.rstrip(sep)}{sep}{tail.rpartition('.')[0]}"
        for name in (file.module, *file.aliases):
            spelled = name.replace(".", sep)  # the path components the name spells, joined
            cut = len(full) - len(spelled)
            if cut > 0 and full[cut - 1] == sep and full.endswith(spelled):
                root = full[: cut - 1] or sep
                counts[root] = counts.get(root, 0) + 1
    return sorted(counts, key=lambda r: -counts[r])


def _changed_files(files: Sequence[SourceFile], changed: Sequence[str]) -> set[str]:
    """Display paths of the files ``changed`` names: a file (by real path, whatever symlink
    it was given through) or every file under a directory."""
    wanted: set[str] = set()
    under: list[str] = []
    for path in changed:
        real = os.path.realpath(path)
        if os.path.isdir(real):
            under.extend((os.path.abspath(path) + os.sep, real + os.sep))
        else:
            wanted.add(real)
    prefixes = tuple(under)
    return {
        f.display
        for f in files
        if f.real in wanted
        or (prefixes and (f.path.startswith(prefixes) or f.real.startswith(prefixes)))
    }


def _stale_findings(stale: Sequence[StaleEntry], select: frozenset[str]) -> list[Finding]:
    """Baseline entries no finding uses, as findings at their line in the baseline file."""
    if not stale:
        return []
    from harness.overrides.analysis import located
    from harness.overrides.rules import RuleSet

    rules = RuleSet(select)
    return [
        located(rule, issue, entry.path, entry.line, 1)
        for entry in stale
        for rule, issue in rules.check(entry)
    ]
