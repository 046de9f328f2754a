"""cache: stat shortcut, content-hash reuse, corruption tolerance, parallel == serial."""

from __future__ import annotations

from pathlib import Path

from harness.overrides.cache import Cache, load
from harness.overrides.discover import discover


def files_in(root: Path, n: int) -> None:
    for i in range(n):
        (root / f"m{i}.py").write_text(f"class C{i}:\n    def f(self, a{i}): self.g(a{i}=1)\n")


def test_reuse_by_stat_and_by_content(tmp_path: Path) -> None:
    files_in(tmp_path, 3)
    found, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    cache_dir = str(tmp_path / "cache")
    cache = Cache(cache_dir)
    first, _, parsed = load(found, cache, jobs=1)
    cache.save()
    assert parsed == 3
    again, _, parsed = load(found, Cache(cache_dir), jobs=1)
    assert parsed == 0 and again == first
    (tmp_path / "m0.py").write_text((tmp_path / "m1.py").read_text())  # same bytes as m1
    _, _, parsed = load(found, Cache(cache_dir), jobs=1)
    assert parsed == 0  # content hash hit


def test_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    files_in(tmp_path, 1)
    found, _ = discover([str(tmp_path / "m0.py")], cwd=str(tmp_path))
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    (cache_dir / "summaries.marshal").write_bytes(b"\x00not marshal")
    summaries, unreadable, parsed = load(found, Cache(str(cache_dir)), jobs=1)
    assert parsed == 1 and unreadable == [] and list(summaries) == ["m0.py"]


def test_parallel_parse_matches_serial(tmp_path: Path) -> None:
    files_in(tmp_path, 60)
    found, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    serial, _, _ = load(found, Cache(None), jobs=1)
    parallel, _, parsed = load(found, Cache(None), jobs=2)
    assert parsed == 60 and parallel == serial
