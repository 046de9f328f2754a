"""Orchestration: discover, reuse a stored result or summarise (cached) and analyse, sort.

Heavy modules (parsing, resolution, rules) are imported only when the stored result of an
identical run on an unchanged tree cannot be reused.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness import __version__
from harness.overrides import baseline as baseline_mod
from harness.overrides.cache import DEFAULT_DIR, SCHEMA, code_version
from harness.overrides.discover import SourceFile, Unreadable, discover, display_path
from harness.overrides.findings import Finding, Severity
from harness.overrides.results import ResultStore, fingerprint, run_key


@dataclass(frozen=True)
class CheckOptions:
    """Knobs of one check run."""

    select: frozenset[str] = frozenset()
    """Codes of optional rules to enable (``harness overrides --list-rules`` shows which)."""
    cache_dir: str | None = DEFAULT_DIR
    """Cache directory (relative to ``cwd``); ``None`` disables caching."""
    jobs: int | None = None
    """Worker processes for parsing; ``None`` = one per CPU."""
    baseline: str | None = None
    """Baseline file: findings it lists are not reported."""
    cwd: str | None = None
    """Directory reported paths are relative to (default: the working directory)."""


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
    files, unreadable = discover([*roots, *(changed or ())], cwd)
    changed_paths = None if changed is None else sorted({display_path(p, cwd) for p in changed})
    cache_dir = None if options.cache_dir is None else os.path.join(cwd, options.cache_dir)
    entries: list[tuple[str, int, int]] = []
    for file in files:
        try:
            st = os.stat(file.path)
        except OSError:
            entries.append((file.path, -1, -1))
            continue
        entries.append((file.path, st.st_mtime_ns, st.st_size))
    key = run_key(
        [
            __version__,
            str(SCHEMA),
            code_version(),
            cwd,
            "\0".join(sorted(os.path.abspath(r) for r in roots)),
            None if changed_paths is None else "\0".join(changed_paths),
            ",".join(sorted(options.select)),
        ]
    )
    print_ = fingerprint(entries, [f"{u.display}:{u.reason}" for u in unreadable])
    store = ResultStore(cache_dir)
    findings = store.get(key, print_)
    stats = Stats(files=len(files), reused=findings is not None)
    if findings is None:
        findings = _analyze(files, unreadable, changed_paths, cache_dir, options, stats)
        store.put(key, print_, findings)
    if options.baseline is not None:
        findings = baseline_mod.filter_new(findings, baseline_mod.read(options.baseline))
    findings.sort(key=Finding.sort_key)
    stats.seconds = time.perf_counter() - started
    return CheckResult(findings, stats)


def _analyze(
    files: Sequence[SourceFile],
    unreadable: Sequence[Unreadable],
    changed: list[str] | None,
    cache_dir: str | None,
    options: CheckOptions,
    stats: Stats,
) -> list[Finding]:
    from harness.overrides.analysis import analyze
    from harness.overrides.cache import Cache, load

    sources = list(files)
    cache = Cache(cache_dir)
    summaries, unreadable_files, stats.parsed = load(sources, cache, options.jobs)
    cache.save()
    findings, stats.classes, stats.checked_classes = analyze(
        sources,
        summaries,
        [*unreadable, *unreadable_files],
        changed=None if changed is None else set(changed),
        select=options.select,
    )
    return findings
