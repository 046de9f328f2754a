"""On-disk cache of file summaries, and parallel summarising of the files not in it.

The cache is one pickle file per directory: ``{content_hash: summary}`` plus a stat index
``{absolute_path: (mtime_ns, size, content_hash)}``, so a warm run neither re-reads nor
re-hashes unchanged files. The header carries the checker and Python versions; a mismatch or
a corrupt file is treated as an empty cache. Writes are atomic (temp file + ``os.replace``).
Cold runs summarise new files in a process pool when there are enough of them.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.overrides.discover import SourceFile
from harness.overrides.summary import Diagnostic, FileSummary, summarize

SCHEMA = 3
"""Bump when the summary format or extraction changes."""
DEFAULT_DIR = os.path.join(".harness_cache", "overrides")
_FILE = "summaries.pickle"
_MAX_ENTRIES = 50_000
_PARALLEL_MIN = 48
"""Fewer new files than this are parsed in-process (a pool costs ~0.1 s to start)."""

StatKey = tuple[int, int]


def _header() -> tuple[str, int, str]:
    return ("harness-overrides", SCHEMA, sys.version)


def digest(data: bytes) -> str:
    """Content hash used as the cache key."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class Cache:
    """Summaries by content hash, with a stat shortcut by path."""

    def __init__(self, directory: str | None) -> None:
        self.directory = directory
        self.summaries: dict[str, FileSummary] = {}
        self.stats: dict[str, tuple[int, int, str]] = {}
        self.dirty = False
        if directory is not None:
            self._load(Path(directory) / _FILE)

    def _load(self, path: Path) -> None:
        try:
            with path.open("rb") as handle:
                payload: Any = pickle.load(handle)
        except (
            OSError,
            EOFError,
            pickle.UnpicklingError,
            ValueError,
            TypeError,
            AttributeError,
            ImportError,
            IndexError,
        ):
            return
        if not isinstance(payload, tuple) or len(payload) != 3 or payload[0] != _header():  # pyright: ignore[reportUnknownArgumentType]
            return
        self.stats, self.summaries = payload[1], payload[2]

    def save(self) -> None:
        """Write the cache if anything changed; failures to write are ignored."""
        if self.directory is None or not self.dirty:
            return
        if len(self.summaries) > _MAX_ENTRIES:
            live = {h for (_, _, h) in self.stats.values()}
            self.summaries = {h: s for h, s in self.summaries.items() if h in live}
        directory = Path(self.directory)
        target = directory / _FILE
        tmp = directory / f".{_FILE}.{os.getpid()}.tmp"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with tmp.open("wb") as handle:
                pickle.dump(
                    (_header(), self.stats, self.summaries),
                    handle,
                    protocol=pickle.HIGHEST_PROTOCOL,
                )
            os.replace(tmp, target)
        except OSError:
            tmp.unlink(missing_ok=True)


def _summarize_one(data: bytes) -> FileSummary:
    return summarize(data)


def load(
    files: Sequence[SourceFile], cache: Cache, jobs: int | None
) -> tuple[dict[str, FileSummary], dict[str, str], int]:
    """Summaries by display path, unreadable files (display -> reason), files parsed."""
    out: dict[str, FileSummary] = {}
    unreadable: dict[str, str] = {}
    todo: list[tuple[SourceFile, bytes, str, StatKey]] = []
    for file in files:
        try:
            st = os.stat(file.path)
        except OSError as exc:
            unreadable[file.display] = f"cannot read file: {exc.strerror}"
            continue
        stat_key = (st.st_mtime_ns, st.st_size)
        known = cache.stats.get(file.path)
        if known is not None and known[:2] == stat_key and known[2] in cache.summaries:
            out[file.display] = cache.summaries[known[2]]
            continue
        try:
            with open(file.path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            unreadable[file.display] = f"cannot read file: {exc.strerror}"
            continue
        h = digest(data)
        cached = cache.summaries.get(h)
        cache.stats[file.path] = (*stat_key, h)
        cache.dirty = True
        if cached is not None:
            out[file.display] = cached
        else:
            todo.append((file, data, h, stat_key))
    for (file, _, h, _), summary in zip(todo, _summarize_all([t[1] for t in todo], jobs)):
        cache.summaries[h] = summary
        out[file.display] = summary
    return out, unreadable, len(todo)


def _summarize_all(blobs: list[bytes], jobs: int | None) -> list[FileSummary]:
    workers = jobs if jobs is not None else min(os.cpu_count() or 1, 8)
    if workers <= 1 or len(blobs) < _PARALLEL_MIN:
        return [summarize(b) for b in blobs]
    # Big files first so the pool's tail is short; results come back in input order.
    order = sorted(range(len(blobs)), key=lambda i: -len(blobs[i]))
    results: list[FileSummary | None] = [None] * len(blobs)
    from concurrent.futures import ProcessPoolExecutor

    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            chunk = max(1, len(blobs) // (workers * 8))
            for i, summary in zip(
                order, pool.map(_summarize_one, [blobs[i] for i in order], chunksize=chunk)
            ):
                results[i] = summary
    except (OSError, RuntimeError):
        return [summarize(b) for b in blobs]
    return [
        r
        if r is not None
        else FileSummary((), (), (), (), (), (), (Diagnostic("HO401", 1, 1, "worker failed"),))
        for r in results
    ]
