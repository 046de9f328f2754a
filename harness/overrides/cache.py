"""On-disk cache of file summaries, and parallel summarising of the files not in it.

A summary is reused only for the same content hash. Cache files are framed (magic, versions,
checksum); anything unreadable or from another version is an empty cache, and an unusable location
means no cache, never an error. Writes are atomic. The directory is found like ruff's; details in
``docs/checker.md``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from harness.overrides.discover import SourceFile, Unreadable, project_root

if TYPE_CHECKING:
    from harness.overrides.summary import FileSummary

SCHEMA = 9
"""Bump when the summary format or extraction changes."""
DIRECTORY_NAME = ".harness_cache"
_SUBDIR = "overrides"
_SUMMARIES = "summaries.bin"
_JOURNAL = "summaries-new.bin"
_JOURNAL_MAX = 256
_MAGIC = b"harness-overrides-cache\n"
_CHECKSUM = 16
_MAX_ENTRIES = 50_000
_PARALLEL_MIN = 48
"""Fewer new files than this are parsed in-process (a pool costs ~0.1 s to start)."""
_GITIGNORE = "# Automatically created by harness.\n*\n"
_CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by harness.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)


@functools.cache
def code_version() -> str:
    """Fingerprint of the checker's own source files (name, size, mtime), taken once per process:
    part of every cache header, so editing the checker never reuses stale summaries."""
    package = os.path.dirname(os.path.realpath(__file__))
    parts: list[str] = []
    for directory in (package, *(os.path.join(package, d) for d in _SUBPACKAGES)):
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".py"):
                st = entry.stat()
                name = os.path.relpath(entry.path, package)
                parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    return digest("\n".join(parts).encode())


_SUBPACKAGES = ("evidence", "facts", "model", "rules")
"""The checker's packages below this one (``suites/overrides/test_cache.py`` checks the list)."""


def digest(data: bytes) -> str:
    """Content hash used as the cache key."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def locate(option: str | None, paths: Sequence[str], cwd: str) -> str | None:
    """The cache directory for a run: ``option`` (``--cache-dir``; ``""`` to find it, ``None`` for
    none), else ``$XDG_CACHE_HOME/harness/<project>``, else ``<project root>/.harness_cache``."""
    if option is None:
        return None
    if option:
        return os.path.join(cwd, option)
    root = project_root([os.path.join(cwd, p) for p in paths] or [cwd])
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):  # the XDG spec says to ignore relative values
        name = f"{os.path.basename(root) or 'root'}-{digest(os.fsencode(root))[:12]}"
        return os.path.join(xdg, "harness", name)
    return os.path.join(root, DIRECTORY_NAME)


_INSTALLED = "installed"
_INSTALLED_KEEP = 8
"""Directories of other interpreter or checker versions kept beside the current one."""


def user_cache_directory(*parts: str) -> str | None:
    """``$XDG_CACHE_HOME/harness/<parts>`` (``~/.cache`` when the variable is unset or
    relative, as the XDG spec says), or ``None`` when there is no usable home directory."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "harness", *parts)


def installed_directory() -> str | None:
    """The machine-wide cache of summaries of installed and standard-library files for this
    interpreter and checker version, or ``None`` when there is no usable home directory."""
    key = digest(f"{sys.version}\0{code_version()}".encode())[:16]
    return user_cache_directory(_INSTALLED, key)


def _prune_installed(directory: str) -> None:
    """Remove the oldest sibling directories of ``directory`` that the checker made (a
    16-digit key holding a ``CACHEDIR.TAG``), keeping ``_INSTALLED_KEEP`` of them."""
    parent, own = os.path.split(directory)
    prune_oldest(
        parent,
        _INSTALLED_KEEP,
        lambda e: (
            e.name != own
            and is_hex(e.name, 16)
            and e.is_dir(follow_symlinks=False)
            and os.path.isfile(os.path.join(e.path, "CACHEDIR.TAG"))
        ),
    )


def is_hex(text: str, *lengths: int) -> bool:
    """Whether ``text`` is lower-case hexadecimal digits, as many as one of ``lengths``."""
    return len(text) in lengths and all(c in "0123456789abcdef" for c in text)


def prune_oldest(parent: str, keep: int, ours: Callable[[os.DirEntry[str]], bool]) -> None:
    """Remove all but the ``keep`` most recently modified entries of ``parent`` that ``ours``
    accepts (a directory with what it holds); failures leave what could not be removed."""
    try:
        entries = [e for e in os.scandir(parent) if ours(e)]
        entries.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime, reverse=True)
    except OSError:
        return
    import shutil  # here, not at the top: it would load compression modules on every start

    for entry in entries[keep:]:
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


def framed_path(directory: str, name: str) -> str:
    """Where :func:`write_framed` puts the file ``name`` of ``directory``."""
    return os.path.join(directory, _SUBDIR, name)


def read_framed(
    directory: str, name: str, header: tuple[Any, ...], valid: Callable[[Any], bool]
) -> Any:
    """The payload :func:`write_framed` wrote with this ``header``, or ``None`` if the file
    is missing, unreadable, corrupt, from another version, or not ``valid``."""
    try:
        with open(framed_path(directory, name), "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    body = raw[len(_MAGIC) + _CHECKSUM :]
    if not raw.startswith(_MAGIC) or raw[len(_MAGIC) : len(_MAGIC) + _CHECKSUM] != _sum(body):
        return None
    try:
        stored_header, payload = marshal.loads(body)
        ok = stored_header == header and valid(payload)
    except Exception:  # marshal raises several types on malformed input; all mean "no cache"
        return None
    return payload if ok else None


def write_framed(directory: str, name: str, header: tuple[Any, ...], payload: Any) -> None:
    """Write ``payload`` atomically under ``directory``; any failure leaves no cache behind."""
    target = framed_path(directory, name)
    tmp = framed_path(directory, f".{name}.{os.getpid()}.tmp")
    try:
        _prepare(directory)
        body = marshal.dumps((header, payload))
        with open(tmp, "wb") as handle:
            handle.write(_MAGIC + _sum(body) + body)
        os.replace(tmp, target)
    except (OSError, ValueError):  # ValueError: marshal of an unexpected object
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _sum(body: bytes) -> bytes:
    return hashlib.blake2b(body, digest_size=_CHECKSUM).digest()


def _prepare(directory: str) -> None:
    """Create the cache directory with its ``.gitignore`` and ``CACHEDIR.TAG`` (as ruff does)."""
    os.makedirs(os.path.join(directory, _SUBDIR), exist_ok=True)
    for name, text in ((".gitignore", _GITIGNORE), ("CACHEDIR.TAG", _CACHEDIR_TAG)):
        marker = os.path.join(directory, name)
        if not os.path.exists(marker):
            with open(marker, "w", encoding="utf-8") as handle:
                handle.write(text)


def _header() -> tuple[str, int, str, str]:
    return ("harness-overrides-summaries", SCHEMA, sys.version, code_version())


def _is_blob_table(payload: Any) -> bool:
    return isinstance(payload, dict) and all(
        isinstance(k, str) and isinstance(v, bytes)
        for k, v in payload.items()  # pyright: ignore[reportUnknownVariableType]
    )


class Cache:
    """Encoded summaries by content hash, in two files: the bulk, and a journal of the entries added
    since, rewritten into the bulk once it holds more than ``_JOURNAL_MAX``."""

    def __init__(self, directory: str | None) -> None:
        self.directory = directory
        self.blobs: dict[str, bytes] = {}
        self.journal: dict[str, bytes] = {}
        """Entries not in the bulk file."""
        self.used: set[str] = set()
        self.dirty = False
        if directory is not None:
            bulk = read_framed(directory, _SUMMARIES, _header(), _is_blob_table)
            journal = read_framed(directory, _JOURNAL, _header(), _is_blob_table)
            self.blobs = {**(bulk or {}), **(journal or {})}
            self.journal = journal or {}

    def add(self, key: str, blob: bytes) -> None:
        """Remember a new entry (written by :meth:`save`)."""
        self.blobs[key] = blob
        self.journal[key] = blob
        self.dirty = True

    def clear(self) -> None:
        """Forget every entry, on disk too."""
        self.blobs, self.journal, self.dirty = {}, {}, True
        self.save(compact=True)

    def get(self, key: str) -> bytes | None:
        """The entry of ``key`` (noted as used, so a compaction keeps it)."""
        self.used.add(key)
        return self.blobs.get(key)

    def save(self, compact: bool = False) -> None:
        """Write what changed; failures to write are ignored."""
        if self.directory is None or not self.dirty:
            return
        if compact or len(self.journal) > _JOURNAL_MAX:
            if len(self.blobs) > _MAX_ENTRIES:
                self.blobs = {h: b for h, b in self.blobs.items() if h in self.used}
            write_framed(self.directory, _SUMMARIES, _header(), self.blobs)
            self.journal = {}
        write_framed(self.directory, _JOURNAL, _header(), self.journal)


def _summarize_one(data: bytes) -> bytes:
    from harness.overrides import codec
    from harness.overrides.summary import summarize

    return codec.dumps(summarize(data))


def _decode(blob: bytes) -> FileSummary | None:
    from harness.overrides import codec

    try:
        return codec.loads(blob)
    except Exception:  # a blob of the wrong shape is a cache miss, whatever it raises
        return None


class InstalledCache:
    """Summaries of installed and standard-library files, one framed file per content hash under
    :func:`installed_directory`, read and written one entry at a time."""

    def __init__(self, enabled: bool) -> None:
        self.directory = installed_directory() if enabled else None
        self._pruned = False

    def get(self, key: str) -> bytes | None:
        """The stored blob of ``key``, or ``None`` (missing, corrupt, another version)."""
        if self.directory is None:
            return None
        blob = read_framed(self.directory, f"{key}.bin", _header(), lambda b: isinstance(b, bytes))
        return blob if isinstance(blob, bytes) else None

    def add(self, key: str, blob: bytes) -> None:
        """Store ``blob`` for ``key``; write failures are ignored."""
        if self.directory is None:
            return
        if not self._pruned:
            self._pruned = True
            if not os.path.isdir(self.directory):  # a new interpreter or checker version
                _prune_installed(self.directory)
        write_framed(self.directory, f"{key}.bin", _header(), blob)

    def clear(self) -> None:
        """Stop using the directory for the rest of the run."""
        self.directory = None


class BlobStore(Protocol):
    """Encoded summaries by content hash: :class:`Cache` or :class:`InstalledCache`."""

    def get(self, key: str) -> bytes | None: ...

    def add(self, key: str, blob: bytes) -> None: ...


def summary_of(data: bytes, store: BlobStore) -> FileSummary | None:
    """The summary of ``data``: from ``store`` by content hash, else made and stored there."""
    hashed = digest(data)
    blob = store.get(hashed)
    summary = None if blob is None else _decode(blob)
    if summary is None:
        blob = _summarize_one(data)
        store.add(hashed, blob)
        summary = _decode(blob)
    return summary


class Source(NamedTuple):
    """A file's bytes, read once per run, and their content hash."""

    file: SourceFile
    data: bytes
    hash: str


def read_sources(files: Sequence[SourceFile]) -> tuple[list[Source], list[Unreadable]]:
    """Every file's bytes and content hash; the files that could not be read."""
    sources: list[Source] = []
    unreadable: list[Unreadable] = []
    for file in files:
        try:
            with open(file.path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            unreadable.append(Unreadable(file.display, f"cannot read file: {exc.strerror}"))
            continue
        sources.append(Source(file, data, digest(data)))
    return sources, unreadable


def load(
    sources: Sequence[Source],
    cache: Cache,
    jobs: int | None,
    meanwhile: Callable[[], object] | None = None,
    ahead: Callable[[FileSummary], object] | None = None,
) -> tuple[dict[str, FileSummary], int]:
    """Summaries by display path (cached ones first) and the number of files parsed. ``meanwhile``
    runs once, while the workers parse; ``ahead`` on each summary they hand back."""
    out: dict[str, FileSummary] = {}
    todo: list[Source] = []
    for source in sources:
        blob = cache.get(source.hash)
        summary = None if blob is None else _decode(blob)
        if summary is not None:
            out[source.file.display] = summary
        else:
            todo.append(source)
    made: dict[int, FileSummary | None] = {}
    ahead = ahead if _workers(len(todo), jobs) > 1 else None  # else it would only add work
    for i, blob in _summarize_all([t.data for t in todo], jobs, meanwhile):
        cache.add(todo[i].hash, blob)
        made[i] = summary = _decode(blob)  # decoded as the workers hand results back
        if ahead is not None and summary is not None:
            ahead(summary)
    out.update((s.file.display, m) for i, s in enumerate(todo) if (m := made[i]) is not None)
    return out, len(todo)


def cpu_count() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _workers(files: int, jobs: int | None) -> int:
    """Worker processes to summarise ``files`` new files with (1: in this process)."""
    return min(jobs if jobs is not None else 8, cpu_count()) if files >= _PARALLEL_MIN else 1


def _summarize_all(
    blobs: list[bytes], jobs: int | None, meanwhile: Callable[[], object] | None = None
) -> Iterator[tuple[int, bytes]]:
    """``(index, encoded summary)`` of every blob, each once, in the order they are made;
    ``meanwhile`` runs once, while the workers parse (or first, without workers)."""
    workers = _workers(len(blobs), jobs)
    done: set[int] = set()
    if workers > 1:
        yield from _in_pool(blobs, workers, meanwhile, done)
    elif meanwhile is not None:
        meanwhile()
    for i, data in enumerate(blobs):
        if i not in done:  # without a pool, or after one failed
            yield i, _summarize_one(data)


_PARENT_POLL = 0.2
"""Seconds between a worker's checks that the process that started it is still there."""


def _exit_with_parent(run: int) -> None:
    """A pool worker's initializer: end this worker once the run or its parent is gone (a killed run
    does not shut the pool down, and a waiting worker would wait forever)."""
    import threading
    import time

    parent = os.getppid()  # the run (fork, spawn) or a fork server that ends with it

    def watch() -> None:
        while os.getppid() == parent:
            try:
                os.kill(run, 0)
            except ProcessLookupError:
                break
            except OSError:  # alive, but not ours to signal
                pass
            time.sleep(_PARENT_POLL)
        os._exit(1)

    threading.Thread(target=watch, name="harness-parent-watch", daemon=True).start()


def _in_pool(
    blobs: list[bytes], workers: int, meanwhile: Callable[[], object] | None, done: set[int]
) -> Iterator[tuple[int, bytes]]:
    """What a process pool summarises of ``blobs`` (indices noted in ``done``): all of them
    unless the pool cannot start or a worker dies. ``meanwhile`` runs once in any case."""
    from concurrent.futures import ProcessPoolExecutor

    from harness.overrides import codec, summary  # imported once, inherited by forked workers

    del codec, summary

    order = sorted(range(len(blobs)), key=lambda i: -len(blobs[i]))  # big files first: short tail
    pool = None
    try:
        pool = ProcessPoolExecutor(
            max_workers=workers, initializer=_exit_with_parent, initargs=(os.getpid(),)
        )
        chunk = max(1, len(blobs) // (workers * 8))
        results = pool.map(_summarize_one, [blobs[i] for i in order], chunksize=chunk)
    except (OSError, RuntimeError):
        results = None
    try:
        if meanwhile is not None:
            meanwhile()
        if results is not None:
            try:
                for i, encoded in zip(order, results, strict=False):
                    done.add(i)
                    yield i, encoded
            except (OSError, RuntimeError):  # a worker died: the caller makes the rest
                pass
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
