"""results: stored findings come back only for the same run on an unchanged tree."""

from __future__ import annotations

from pathlib import Path

from harness.overrides.findings import Evidence, Finding, Severity
from harness.overrides.result_cache import ResultStore, fingerprint

FINDINGS = [
    Finding("a.py", 3, 5, "HO101", "renamed-parameter", Severity.ERROR, "m", class_name="a.B",
            method="f", base_class="a.A", base_path="a.py", base_line=1, params=("x", "y"),
            signature="def B.f(self, y)", base_signature="def A.f(self, x)",
            evidence=Evidence("a.py", 2, 9, "self.f(x=1)", "TypeError: B.f() got ...", "self")),
    Finding("b.py", 1, 1, "HO401", "unparsable-file", Severity.WARNING, "syntax error"),
]  # fmt: skip


def test_round_trip_and_invalidation(tmp_path: Path) -> None:
    key = fingerprint("v", "roots")
    print_ = fingerprint((("a.py", "hash-1"),), ())
    ResultStore(str(tmp_path)).put(key, print_, FINDINGS)
    store = ResultStore(str(tmp_path))
    assert store.get(key, print_) == FINDINGS
    assert store.get(key, fingerprint((("a.py", "hash-2"),), ())) is None  # a file changed
    assert store.get(fingerprint("v", "other roots"), print_) is None


def test_disabled_and_corrupt_stores_are_empty(tmp_path: Path) -> None:
    ResultStore(None).put(b"k", b"p", FINDINGS)  # no directory: a no-op
    (tmp_path / "overrides").mkdir()
    (tmp_path / "overrides" / "results.bin").write_bytes(b"junk")
    assert ResultStore(str(tmp_path)).get(b"k", b"p") is None
