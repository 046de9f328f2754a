"""On-disk cache of file summaries, and parallel summarising of the files not in it.

The cache is one :mod:`marshal` file per directory: ``{content_hash: encoded summary}`` plus
a stat index ``{absolute_path: (mtime_ns, size, content_hash)}``, so a warm run neither
re-reads nor re-hashes unchanged files, and decodes summaries with :mod:`harness.overrides.codec`. The header carries the checker and Python versions; a mismatch or
a corrupt file is treated as an empty cache. Writes are atomic (temp file + ``os.replace``).
Cold runs summarise new files in a process pool when there are enough of them.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.overrides.discover import SourceFile, Unreadable

if TYPE_CHECKING:
    from harness.overrides.summary import FileSummary

SCHEMA = 6
"""Bump when the summary format or extraction changes."""
DEFAULT_DIR = os.path.join(".harness_cache", "overrides")
_FILE = "summaries.marshal"
_MAX_ENTRIES = 50_000
_PARALLEL_MIN = 48
"""Fewer new files than this are parsed in-process (a pool costs ~0.1 s to start)."""

StatKey = tuple[int, int]


def code_version() -> str:
    """Fingerprint of the checker's own source files (name, size, mtime).

    Part of every cache key, so editing the checker never reuses stale summaries or results;
    ``SCHEMA`` still documents deliberate format changes.
    """
    package = Path(__file__).resolve().parent
    parts: list[str] = []
    for directory in (package, package / "rules"):
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".py"):
                st = entry.stat()
                parts.append(f"{entry.name}:{st.st_size}:{st.st_mtime_ns}")
    return digest("\n".join(parts).encode())


def _header() -> tuple[str, int, str, str]:
    return ("harness-overrides", SCHEMA, sys.version, code_version())


def digest(data: bytes) -> str:
    """Content hash used as the cache key."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class Cache:
    """Encoded summaries by content hash, with a stat shortcut by path."""

    def __init__(self, directory: str | None) -> None:
        self.directory = directory
        self.blobs: dict[str, bytes] = {}
        self.stats: dict[str, tuple[int, int, str]] = {}
        self.dirty = False
        if directory is not None:
            self._load(Path(directory) / _FILE)

    def _load(self, path: Path) -> None:
        try:
            payload: Any = marshal.loads(path.read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            return
        if not isinstance(payload, tuple) or len(payload) != 3 or payload[0] != _header():  # pyright: ignore[reportUnknownArgumentType]
            return
        self.stats, self.blobs = payload[1], payload[2]

    def save(self) -> None:
        """Write the cache if anything changed; failures to write are ignored."""
        if self.directory is None or not self.dirty:
            return
        if len(self.blobs) > _MAX_ENTRIES:
            live = {h for (_, _, h) in self.stats.values()}
            self.blobs = {h: b for h, b in self.blobs.items() if h in live}
        directory = Path(self.directory)
        target = directory / _FILE
        tmp = directory / f".{_FILE}.{os.getpid()}.tmp"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(marshal.dumps((_header(), self.stats, self.blobs)))
            os.replace(tmp, target)
        except OSError:
            tmp.unlink(missing_ok=True)


def _summarize_one(data: bytes) -> bytes:
    from harness.overrides import codec
    from harness.overrides.summary import summarize

    return codec.dumps(summarize(data))


def _decode(blob: bytes) -> FileSummary | None:
    from harness.overrides import codec

    try:
        return codec.loads(blob)
    except (ValueError, EOFError, TypeError, LookupError):
        return None


def load(
    files: Sequence[SourceFile], cache: Cache, jobs: int | None
) -> tuple[dict[str, FileSummary], list[Unreadable], int]:
    """Summaries by display path, the files that could not be read, number of files parsed."""
    out: dict[str, FileSummary] = {}
    unreadable: list[Unreadable] = []
    todo: list[tuple[SourceFile, bytes, str, StatKey]] = []
    for file in files:
        try:
            st = os.stat(file.path)
        except OSError as exc:
            unreadable.append(Unreadable(file.display, f"cannot read file: {exc.strerror}"))
            continue
        stat_key = (st.st_mtime_ns, st.st_size)
        known = cache.stats.get(file.path)
        if known is not None and known[0] == stat_key[0] and known[1] == stat_key[1]:
            blob = cache.blobs.get(known[2])
            summary = None if blob is None else _decode(blob)
            if summary is not None:
                out[file.display] = summary
                continue
        try:
            with open(file.path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            unreadable.append(Unreadable(file.display, f"cannot read file: {exc.strerror}"))
            continue
        h = digest(data)
        cache.stats[file.path] = (*stat_key, h)
        cache.dirty = True
        blob = cache.blobs.get(h)
        summary = None if blob is None else _decode(blob)
        if summary is not None:
            out[file.display] = summary
        else:
            todo.append((file, data, h, stat_key))
    for (file, _, h, _), blob in zip(todo, _summarize_all([t[1] for t in todo], jobs), strict=True):
        cache.blobs[h] = blob
        summary = _decode(blob)
        if summary is not None:
            out[file.display] = summary
    return out, unreadable, len(todo)


def _summarize_all(blobs: list[bytes], jobs: int | None) -> list[bytes]:
    workers = jobs if jobs is not None else min(os.cpu_count() or 1, 8)
    if workers <= 1 or len(blobs) < _PARALLEL_MIN:
        return [_summarize_one(b) for b in blobs]
    from concurrent.futures import ProcessPoolExecutor

    from harness.overrides import codec, summary  # imported once, inherited by forked workers

    del codec, summary

    # Big files first so the pool's tail is short; results are put back in input order.
    order = sorted(range(len(blobs)), key=lambda i: -len(blobs[i]))
    results: list[bytes] = [b""] * len(blobs)
    try:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            chunk = max(1, len(blobs) // (workers * 8))
            done = pool.map(_summarize_one, [blobs[i] for i in order], chunksize=chunk)
            for i, encoded in zip(order, done, strict=True):
                results[i] = encoded
    except (OSError, RuntimeError):
        return [_summarize_one(b) for b in blobs]
    return results
