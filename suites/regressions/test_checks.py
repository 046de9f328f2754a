"""Which generic checks a user's backend gets: scenarios it can run, as vLLM 0.9.0 would."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.reference.backends.abstract import AttentionBackend
from harness.reference.backends.flash_attn import FlashAttentionBackend
from harness.reference.backends.flashinfer import FlashInferBackend
from harness.reference.backends.mla.rocm_aiter_mla import AiterMLABackend
from harness.regressions import Check, Variant
from harness.regressions.checks import generic_checks, scaling_check, simulate_check
from suites.simulation.variants import ThreadedOOMBackend

COMMON = [
    "overrides",
    "oracle:mixed-prefill-decode",
    "oracle:preemption",
    "oracle:cascade-common-prefix",
]
MEMORY = ["scaling", "simulate:h100-95"]


@pytest.mark.parametrize(
    ("backend", "names"),
    [
        (
            FlashAttentionBackend,
            [*COMMON, "oracle:hybrid-unified", "oracle:hybrid-two-groups", *MEMORY],
        ),
        (FlashInferBackend, [*COMMON, *MEMORY]),  # refuses models mixing windows (vLLM 0.9.0)
        (AiterMLABackend, ["overrides"]),  # the reference model has no MLA layers
    ],
)
def test_generic_checks_fit_the_backend(backend: type[AttentionBackend], names: list[str]) -> None:
    assert [check.name for check in generic_checks(Variant(backend))] == names


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize(
    "check", [simulate_check(max_steps=1), scaling_check(max_steps=1)], ids=lambda c: c.name
)
def test_a_variant_that_allocates_in_a_thread_fails_the_memory_checks(check: Check) -> None:
    """What ``regressions verify`` runs on a user's variant: the thread's KV cache copy is seen."""
    outcome = check.run(Variant(ThreadedOOMBackend))
    assert outcome.failed, outcome.detail
    assert "aten.clone" in outcome.detail or "out of memory" in outcome.detail


def test_scanned_copies_keep_no_comment_the_checker_reads_as_an_ignore(tmp_path: Path) -> None:
    # The catalog strips inline suppressions from the copies it scans with the same pattern
    # the checker reads them with: a bare one and a spaced one are gone too.
    from harness.overrides.summary import summarize
    from harness.regressions.checks import _scannable  # pyright: ignore[reportPrivateUsage]

    source = tmp_path / "mod.py"
    source.write_text(
        "class A:\n"
        "    def f(self, a): ...  # harness: ignore[HO101]\n"
        "    def g(self, a): ...  #harness:ignore\n"
        "    def h(self, a): ...  # harness: ignore [HO102]\n"
    )
    assert len(summarize(source.read_bytes()).ignores) == 3
    with _scannable({"pkg.mod": source}, honour=False) as originals:
        (copy,) = [c for c, o in originals.items() if o == source]
        assert summarize(copy.read_bytes()).ignores == ()
