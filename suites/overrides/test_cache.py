"""cache: reuse by content hash only, any broken cache is empty, an unusable location is no
cache, the location is found like ruff's, and a cached run always equals an uncached one."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.overrides.cache import (
    Cache,
    InstalledCache,
    load,
    locate,
    read_sources,
    user_cache_directory,
    write_framed,
)
from harness.overrides.checker import CheckOptions, check
from harness.overrides.discover import discover
from harness.overrides.summary import FileSummary

# A base calls self.build(block_table_tensor=...); the subclass renamed it (issue 12).
BASE = """\
class Builder:
    def build(self, block_table_tensor, seq_lens):
        return block_table_tensor

    def run(self):
        return self.build(block_table_tensor=1, seq_lens=2)
"""
FIXED = "from base import Builder\n\n\nclass Sub(Builder):\n    def build(self, block_table_tensor, seq_lens): ...\n"
STALE = FIXED.replace("block_table_tensor, seq_lens): ...", "block_table, seq_lens): ...#  size")
CRASH = ("sub.py", 5, "HO101", "error")


def files_in(root: Path, n: int) -> None:
    for i in range(n):
        (root / f"m{i}.py").write_text(f"class C{i}:\n    def f(self, a{i}): self.g(a{i}=1)\n")


def project(root: Path, sub: str = FIXED) -> Path:
    root.mkdir(exist_ok=True)
    (root / "base.py").write_text(BASE)
    (root / "sub.py").write_text(sub)
    return root


def run(root: Path, cache: str | None) -> list[tuple[str, int, str, str]]:
    result = check([str(root)], options=CheckOptions(cwd=str(root), cache_dir=cache))
    return [(f.path, f.line, f.code, f.severity.value) for f in result.findings]


def set_mtime(path: Path, ns: int) -> None:
    os.utime(path, ns=(ns, ns))


# Reuse


def test_reuse_by_content_hash(tmp_path: Path) -> None:
    files_in(tmp_path, 3)
    found, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    cache_dir = str(tmp_path / "cache")
    cache = Cache(cache_dir)
    first, parsed = load(read_sources(found)[0], cache, jobs=1)
    cache.save()
    assert parsed == 3
    again, parsed = load(read_sources(found)[0], Cache(cache_dir), jobs=1)
    assert parsed == 0 and again == first
    (tmp_path / "m0.py").write_text((tmp_path / "m1.py").read_text())  # same bytes as m1
    _, parsed = load(read_sources(found)[0], Cache(cache_dir), jobs=1)
    assert parsed == 0  # content hash hit


def test_same_size_edit_with_restored_mtime_is_seen(tmp_path: Path) -> None:
    """As ``cp -p``, ``tar``, ``git stash`` and some editors leave it (issue 12)."""
    root = project(tmp_path / "p")
    cache = str(tmp_path / "cache")
    sub = root / "sub.py"
    mtime = sub.stat().st_mtime_ns
    assert run(root, cache) == []
    assert len(STALE) == len(FIXED)
    sub.write_text(STALE)
    set_mtime(sub, mtime)
    assert run(root, cache) == [CRASH]
    assert run(root, None) == [CRASH]


def test_parallel_parse_matches_serial(tmp_path: Path) -> None:
    files_in(tmp_path, 60)
    found, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    sources, _ = read_sources(found)
    serial, _ = load(sources, Cache(None), jobs=1)
    parallel, parsed = load(sources, Cache(None), jobs=2)
    assert parsed == 60 and parallel == serial


def test_summaries_are_handed_ahead_only_while_workers_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load(ahead=...)`` sees each summary the pool makes (to read modules outside the tree
    meanwhile), never the cached ones, and nothing when the files are parsed in process."""
    monkeypatch.setattr("harness.overrides.cache.cpu_count", lambda: 2)
    files_in(tmp_path, 60)
    found, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    sources, _ = read_sources(found)
    seen: list[FileSummary] = []
    serial, _ = load(sources, Cache(None), jobs=1, ahead=seen.append)
    assert seen == []
    warm = Cache(None)
    for source in sources[:10]:
        warm.blobs[source.hash] = _encoded(source.data)
    parallel, parsed = load(sources, warm, jobs=2, ahead=seen.append)
    assert parsed == 50 and parallel == serial
    assert sorted(map(id, seen)) == sorted(id(parallel[s.file.display]) for s in sources[10:])


def test_work_given_to_do_meanwhile_runs_once_and_the_order_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``load(meanwhile=...)`` runs it once, while the workers parse (or before parsing in
    process); summaries keep the files' order (cached ones first) however the pool returns."""
    files_in(tmp_path, 60)
    found, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    sources, _ = read_sources(found)
    calls: list[int] = []
    serial, _ = load(sources, Cache(None), jobs=1, meanwhile=lambda: calls.append(1))
    parallel, parsed = load(sources, Cache(None), jobs=2, meanwhile=lambda: calls.append(2))
    assert calls == [1, 2] and parsed == 60
    assert list(parallel) == list(serial) == [s.file.display for s in sources]
    warm = Cache(None)
    for source in sources[:30]:
        warm.blobs[source.hash] = _encoded(source.data)
    mixed, parsed = load(sources[::-1], warm, jobs=2, meanwhile=lambda: calls.append(3))
    assert parsed == 30 and calls == [1, 2, 3]
    cached = {s.hash for s in sources[:30]}
    order = [s.file.display for s in sources[::-1] if s.hash in cached]
    order += [s.file.display for s in sources[::-1] if s.hash not in cached]
    assert list(mixed) == order and mixed == serial


def test_a_pool_that_breaks_leaves_no_file_unsummarised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import concurrent.futures

    files_in(tmp_path, 60)
    found, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    sources, _ = read_sources(found)
    expected, _ = load(sources, Cache(None), jobs=1)

    class Broken:
        def __init__(self, max_workers: int, **options: object) -> None:
            pass

        def shutdown(self, cancel_futures: bool = False) -> None:
            pass

        def map(self, fn: object, items: list[bytes], chunksize: int) -> object:
            yield from [_encoded(items[0]), _encoded(items[1])]
            raise concurrent.futures.process.BrokenProcessPool("a worker died")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Broken)
    calls: list[int] = []
    got, parsed = load(sources, Cache(None), jobs=2, meanwhile=lambda: calls.append(1))
    assert got == expected and list(got) == list(expected) and parsed == 60 and calls == [1]


def _encoded(data: bytes) -> bytes:
    from harness.overrides import codec
    from harness.overrides.summary import summarize

    return codec.dumps(summarize(data))


# Broken caches are empty


def _cache_files(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / "overrides").iterdir() if p.suffix == ".bin")


@pytest.mark.integration  # over ~2 s: the slow tier
def test_byte_flips_never_lose_the_finding(tmp_path: Path) -> None:
    root = project(tmp_path / "p", STALE)
    cache = tmp_path / "cache"
    assert run(root, str(cache)) == [CRASH]
    pristine = {p: p.read_bytes() for p in _cache_files(cache)}
    assert len(pristine) == 2  # recent summaries and results
    rng = random.Random(12)
    for _ in range(60):
        for path, data in pristine.items():
            flipped = bytearray(data)
            for _ in range(rng.randint(1, 3)):
                flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            path.write_bytes(bytes(flipped))
        assert run(root, str(cache)) == [CRASH]


@pytest.mark.parametrize(
    ("name", "header", "payload"),
    [
        ("summaries.bin", None, {"0" * 32: b"\x00garbage"}),
        ("summaries-new.bin", None, {"0" * 32: b"\x00garbage"}),
        ("summaries.bin", None, {"0" * 32: 7}),
        ("summaries.bin", None, ["not", "a", "table"]),
        ("results.bin", ("harness-overrides-results", 3), {b"k": (b"p", ((1, 2, 3),))}),
        ("results.bin", ("harness-overrides-results", 3), {b"k": "nonsense"}),
    ],
)
def test_well_formed_cache_of_the_wrong_shape_is_empty(
    name: str, header: tuple[object, ...] | None, payload: object, tmp_path: Path
) -> None:
    from harness.overrides import cache as cache_mod

    root = project(tmp_path / "p", STALE)
    cache = tmp_path / "cache"
    if header is None:
        header = cache_mod._header()  # pyright: ignore[reportPrivateUsage]
    if name.startswith("summaries"):  # every file's real hash maps to the junk blob
        sources, _ = read_sources(discover([str(root)], cwd=str(root))[0])
        if isinstance(payload, dict):
            payload = {s.hash: next(iter(payload.values())) for s in sources}
    write_framed(str(cache), name, header, payload)
    assert run(root, str(cache)) == [CRASH]
    if name == "results.bin":  # a stored run under the real key, fingerprint and all
        assert run(root, str(cache)) == [CRASH]


def test_stored_results_of_the_wrong_shape_are_a_miss(tmp_path: Path) -> None:
    from harness.overrides.result_cache import SCHEMA, ResultStore

    root = project(tmp_path / "p", STALE)
    cache = tmp_path / "cache"
    assert run(root, str(cache)) == [CRASH]
    store = ResultStore(str(cache))
    for key, (print_, *_) in list(store.runs.items()):
        store.runs[key] = (print_, (("a.py", "not a line", 1),), ())
    write_framed(str(cache), "results.bin", ("harness-overrides-results", SCHEMA), store.runs)
    assert run(root, str(cache)) == [CRASH]


# Unusable locations are no cache


def _unusable(kind: str, tmp_path: Path) -> Path:
    target = tmp_path / "cache"
    if kind == "file-in-place":
        target.write_text("not a directory")
    elif kind == "file-as-data-dir":
        target.mkdir()
        (target / "overrides").write_text("not a directory")
    elif kind == "directory-as-cache-file":
        (target / "overrides" / "summaries.bin").mkdir(parents=True)
        (target / "overrides" / "results.bin").mkdir(parents=True)
    elif kind == "under-a-file":
        (tmp_path / "file").write_text("")
        target = tmp_path / "file" / "cache"
    return target


@pytest.mark.parametrize(
    "kind", ["file-in-place", "file-as-data-dir", "directory-as-cache-file", "under-a-file"]
)
def test_unusable_cache_location_is_no_cache(kind: str, tmp_path: Path) -> None:
    root = project(tmp_path / "p", STALE)
    target = _unusable(kind, tmp_path)
    assert run(root, str(target)) == [CRASH]
    assert run(root, str(target)) == [CRASH]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes whatever the permissions")
def test_read_only_cache_directory_is_no_cache(tmp_path: Path) -> None:
    root = project(tmp_path / "p", STALE)
    target = tmp_path / "cache"
    target.mkdir()
    target.chmod(0o500)
    try:
        assert run(root, str(target)) == [CRASH]
    finally:
        target.chmod(0o700)


# Location


def test_default_location_is_the_project_root_with_a_gitignore(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    repo = tmp_path / "repo"
    (repo / "src" / "pkg").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    project(repo / "src" / "pkg", STALE)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not the current directory: found from the scanned paths
    result = check([str(repo / "src" / "pkg")])
    assert [f.code for f in result.findings] == ["HO101"]
    assert (repo / ".harness_cache" / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (repo / ".harness_cache" / "CACHEDIR.TAG").is_file()
    assert _cache_files(repo / ".harness_cache")
    assert not list(elsewhere.iterdir())
    assert locate("", [str(repo / "src")], str(elsewhere)) == str(repo / ".harness_cache")


def test_xdg_cache_home_and_cache_dir_are_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path / "p", STALE)
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    located = locate("", [str(root)], str(root))
    assert located is not None and located.startswith(str(xdg / "harness") + os.sep)
    assert run(root, "") == [CRASH]
    assert _cache_files(Path(located)) and not (root / ".harness_cache").exists()
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # invalid per the spec: ignored
    assert locate("", [str(root)], str(root)) == str(root / ".harness_cache")
    assert locate("mine", [str(root)], str(tmp_path)) == str(tmp_path / "mine")
    assert locate(None, [str(root)], str(root)) is None


# Cached == uncached


@pytest.mark.integration  # over ~2 s: the slow tier
def test_random_edits_with_restored_mtimes(tmp_path: Path) -> None:
    """Whatever is edited, however the times look, a cached run equals ``--no-cache``."""
    rng = random.Random(7)
    root = tmp_path / "tree"
    root.mkdir()
    names = ["block_table_tensor", "block_table_tensoX", "seq_lens_xxxxxxxxx", "seq_lens"]
    calls = ["self.f(block_table_tensor=1, seq_lens=2)", "self.f(1, 2)".ljust(40)]
    cache = str(tmp_path / "cache")
    stamp = 1_700_000_000_000_000_000
    for step in range(40):
        for i in range(4):
            a, b = rng.sample(names, 2)
            path = root / f"m{i}.py"
            base = f"m{i - 1}" if i else None
            head = f"from {base} import C{i - 1} as Base\n" if base else "class Base: pass\n"
            call = rng.choice(calls)
            path.write_text(
                f"{head}class C{i}(Base):\n    def f(self, {a}, {b}): ...\n    def g(self): {call}\n"
            )
            set_mtime(path, stamp)  # every version of every file looks the same
        cached, uncached = run(root, cache), run(root, None)
        assert cached == uncached, f"step {step}"


def test_parser_processes_are_capped_at_the_cpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--jobs 1000`` used to fork 1,000 workers (issue 12)."""
    import concurrent.futures

    from harness.overrides import cache as cache_mod

    asked: list[int] = []

    class Pool(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, max_workers: int, **options: object) -> None:
            asked.append(max_workers)  # not its initializer: it would watch this process
            super().__init__(max_workers)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Pool)
    monkeypatch.setattr(cache_mod, "cpu_count", lambda: 3)
    blobs = [b"class C:\n    def f(self): ...\n"] * 60
    made = sorted(cache_mod._summarize_all(blobs, 1000))  # pyright: ignore[reportPrivateUsage]
    assert made == [(i, cache_mod._summarize_one(blobs[0])) for i in range(60)]  # pyright: ignore[reportPrivateUsage]
    assert asked == [3]


def test_corrupt_deferred_parts_are_re_derived(tmp_path: Path) -> None:
    """Signatures and calls are decoded only when needed; broken ones then mean no cache."""
    import marshal

    from harness.overrides import cache as cache_mod

    root = project(tmp_path / "p", STALE)
    cache = tmp_path / "cache"
    assert run(root, str(cache)) == [CRASH]
    blobs = Cache(str(cache)).blobs
    broken = {}
    for h, blob in blobs.items():
        raw = list(marshal.loads(blob))
        raw[0] = tuple((*c[:7], b"junk", b"\x00") for c in raw[0])  # every class's details
        broken[h] = marshal.dumps(tuple(raw))
    for name in ("summaries.bin", "summaries-new.bin"):  # the bulk and the recent entries
        write_framed(str(cache), name, cache_mod._header(), broken)  # pyright: ignore[reportPrivateUsage]
    (cache / "overrides" / "results.bin").unlink()
    assert run(root, str(cache)) == [CRASH]
    assert run(root, str(cache)) == [CRASH]


def test_the_user_cache_follows_xdg_and_ignores_a_relative_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_directory("since") == str(tmp_path / "xdg" / "harness" / "since")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache_directory() == str(tmp_path / "home" / ".cache" / "harness")
    monkeypatch.setenv("HOME", "not-absolute")
    assert user_cache_directory("installed") is None


def _children(pid: int) -> set[int]:
    """Processes whose parent is ``pid`` (read from /proc)."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("signal_number", [signal.SIGKILL, signal.SIGTERM], ids=["KILL", "TERM"])
def test_a_killed_cold_run_leaves_no_pool_worker_behind(tmp_path: Path, signal_number: int) -> None:
    """Issue 27, bug 8: ``timeout`` or a cancelled CI job kills the run, not its workers."""
    body = "".join(
        f"    def m{j}(self, a, b=1):\n        return self.m{j}(a, b=b)\n" for j in range(150)
    )
    for i in range(50):
        (tmp_path / f"m{i}.py").write_text(f"class C{i}:\n{body}")
    command = [sys.executable, "-m", "harness.overrides", "--no-cache", "--jobs", "2", "."]
    run = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL)
    workers: set[int] = set()
    for _ in range(2000):  # until the pool has started (each pass reads /proc once)
        workers = _children(run.pid)
        if workers or run.poll() is not None:
            break
    assert workers, "the run ended before its pool started: give it more to parse"
    os.kill(run.pid, signal_number)
    run.wait()
    for _ in range(200):  # a worker checks for its parent every 0.2 s
        if not any(_alive(w) for w in workers):
            break
        time.sleep(0.05)
    left = [w for w in workers if _alive(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, f"pool workers {left} outlived the killed run"


def test_the_code_version_covers_every_package_of_the_checker() -> None:
    """Editing any module of the checker must never reuse stale summaries."""
    from harness.overrides import cache as cache_mod

    package = Path(cache_mod.__file__).parent
    found = {p.parent.name for p in package.glob("*/__init__.py")}
    assert set(cache_mod._SUBPACKAGES) == found  # pyright: ignore[reportPrivateUsage]


def test_a_new_installed_cache_keeps_eight_older_ones_and_nothing_it_did_not_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    parent = tmp_path / "harness" / "installed"
    made = [parent / f"{n:016x}" for n in range(10)]  # made[0] the most recently used
    for age, directory in enumerate(made):
        directory.mkdir(parents=True)
        (directory / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
        os.utime(directory, (1_000_000 - age, 1_000_000 - age))
    untagged = parent / ("f" * 16)
    untagged.mkdir()
    other = parent / "not-a-key"
    other.mkdir()
    store = InstalledCache(enabled=True)
    store.add("k", b"blob")
    assert store.get("k") == b"blob"
    kept = {p for p in parent.iterdir() if p.name != os.path.basename(store.directory or "")}
    assert kept == {*made[:8], untagged, other}
