"""The hunt's sections on a small, bounded plan; a tree with a proven crash fails the job."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.hunt.job import HuntReport, Row, hunt
from harness.regressions import get_regression

CRASHING_TREE = {
    "base.py": "class Base:\n    def run(self):\n        return self.step(x=1)\n\n"
    "    def step(self, x):\n        return x\n",
    "sub.py": "from base import Base\n\n\nclass Sub(Base):\n    def step(self, y):\n        return y\n",
}


@pytest.fixture(scope="module")
def quick_report() -> HuntReport:
    """One cheap entry, one device, bounded runs: every section once."""
    return hunt(
        devices=("h100-95",), entries=[get_regression("aiter-mla-last-page-len")], quick=True
    )


def test_every_section_behaves_on_the_reference(quick_report: HuntReport) -> None:
    sections = [r.section for r in quick_report.rows]
    assert sections == [
        "overrides",
        "catalog",
        "scaling",
        "scaling",
        "scaling",
        "gsm8k",
        "gsm8k",
        "budget",
    ]
    assert quick_report.ok and not quick_report.crash, [r.to_dict() for r in quick_report.rows]
    rows = {(r.section, r.name): r for r in quick_report.rows}
    assert rows[("overrides", quick_report.path)].verdict == "pass"
    assert quick_report.path.endswith("harness/reference")
    assert rows[("scaling", "aiter-mla-last-page-len (buggy)")].verdict == "n/a"
    oom = rows[("gsm8k", "flashinfer-oom on h100-95")]
    assert oom.verdict == "FAIL" and oom.expected == "fail" and not oom.misbehaves
    assert "OOM at step 0: CUDA out of memory. Tried to allocate 2.12 GiB" in oom.detail
    assert "% of the 9.50 GiB margin" in rows[("budget", "reference on h100-95")].detail
    assert set(quick_report.simulations) == {"reference@h100-95", "flashinfer-oom@h100-95"}


def test_a_proven_crash_in_path_fails_the_hunt(tmp_path: Path) -> None:
    for name, text in CRASHING_TREE.items():
        (tmp_path / name).write_text(text)
    report = hunt(tmp_path, devices=(), entries=[], quick=True)
    (row,) = [r for r in report.rows if r.section == "overrides"]
    assert row.crash and row.verdict == "FAIL" and "HO101" in row.detail
    assert report.crash and not report.ok


@pytest.mark.parametrize(
    ("verdict", "expected", "misbehaves"),
    [
        ("pass", "pass", False),
        ("FAIL", "pass", True),
        ("FAIL", "fail", False),
        ("pass", "fail", True),
        ("error", None, True),
        ("FAIL", None, False),
        ("n/a", None, False),
    ],
)
def test_row_judgement(verdict: str, expected: str | None, misbehaves: bool) -> None:
    row = Row("s", "n", verdict, expected, "", 0.0)  # type: ignore[arg-type]
    assert row.misbehaves is misbehaves


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("in_a_thread", [False, True])
def test_sys_exit_in_a_variant_is_an_error_row_and_the_hunt_goes_on(
    tmp_path: Path, in_a_thread: bool
) -> None:
    """A buggy variant calling ``sys.exit(0)`` while it builds, also in a worker thread: its
    catalog and scaling rows are errors (the hunt fails), and every row after them still runs."""
    from suites.regressions.variants import exiting_entry

    (tmp_path / "ok.py").write_text("class A:\n    pass\n")
    entries = [exiting_entry("exits", in_a_thread=in_a_thread)]
    report = hunt(tmp_path, devices=(), entries=entries, quick=True)
    rows = {(r.section, r.name): r for r in report.rows}
    assert rows[("catalog", "exits")].misbehaves
    scaling = rows[("scaling", "exits (buggy)")]
    assert scaling.verdict == "error" and "sys.exit(0)" in scaling.detail
    assert not report.ok and len(report.rows) == 5


@pytest.mark.parametrize(
    "config",
    [
        '[tool.harness.overrides]\nextend-exclude = ["sub.py"]\n',
        '[tool.harness.overrides]\nbaseline = "known.json"\n',
    ],
)
def test_the_trees_own_configuration_is_read(
    tmp_path: Path, config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``hunt PATH`` checks PATH as ``harness overrides PATH`` does: with its
    ``[tool.harness.overrides]`` (an excluded file's crash, a baselined one, is not reported)."""
    from harness.cli import main

    for name, text in CRASHING_TREE.items():
        (tmp_path / name).write_text(text)
    assert main(["overrides", "--write-baseline", str(tmp_path / "known.json"), str(tmp_path)]) == 0
    (tmp_path / "pyproject.toml").write_text(config)
    assert main(["overrides", str(tmp_path)]) == 0
    capsys.readouterr()
    report = hunt(tmp_path, devices=(), entries=[], quick=True)
    (row,) = [r for r in report.rows if r.section == "overrides"]
    assert row.verdict == "pass" and not row.crash, row.detail


def test_a_tree_with_nothing_to_check_is_an_error_row_unless_allowed(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("no Python\n")
    (row, *_) = hunt(tmp_path, devices=(), entries=[], quick=True).rows
    assert row.verdict == "error" and "no Python file to check" in row.detail
    (row, *_) = hunt(tmp_path, devices=(), entries=[], quick=True, allow_empty=True).rows
    assert row.verdict == "pass" and row.detail.startswith("0 files")


OS_EXIT_ENTRY = """
import os
from harness.reference.backends.flashinfer import FlashInferBackend, FlashInferMetadataBuilder
from harness.regressions import Check, Regression, Upstream, Variant
from harness.regressions.entry import CheckOutcome


class ExitBuilder(FlashInferMetadataBuilder):
    def build(self, common_prefix_len, common_attn_metadata):
        os._exit(0)


class ExitBackend(FlashInferBackend):
    @staticmethod
    def get_builder_cls():
        return ExitBuilder


def exits_on_buggy(variant):
    if variant.backend is ExitBackend:
        os._exit(0)
    return CheckOutcome(False, "ok")


REGRESSION = Regression(
    id="installed-os-exit",
    title="an installed entry whose buggy variant ends the interpreter",
    upstream=(Upstream("issue", 1, "reported in"),),
    bug_class="test",
    component="nothing",
    buggy=Variant(ExitBackend),
    fixed=Variant(FlashInferBackend),
    checks=(Check("exits", "ends the interpreter on the buggy variant", exits_on_buggy),),
    found_upstream="n/a",
    caught_by="n/a",
)
"""


@pytest.mark.parametrize(
    "real_child", [False, pytest.param(True, marks=pytest.mark.integration, id="real-child")]
)
def test_an_installed_entry_that_calls_os_exit_is_an_error_row_and_the_hunt_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_child: bool
) -> None:
    """A user's entry (an entry point) runs its catalog checks in a child process: its
    ``os._exit(0)`` is an error row, its in-process scaling row is not run, the hunt reports.
    The fast tier stands in for the children with their :class:`ChildError`."""
    from harness import child
    from harness.errors import ChildError
    from harness.regressions import registry

    if not real_child:

        def ended(function: str, *args: object) -> object:
            how = "the process exited with status 0 before returning (os._exit(), or a crash"
            raise ChildError(f"{how} in native code)", None, ["its last words"])

        monkeypatch.setattr(child, "run_in_child", ended)

    site = tmp_path / "site"
    (site / "exit_entries-1.0.dist-info").mkdir(parents=True)
    (site / "exit_entries.py").write_text(OS_EXIT_ENTRY)
    info = site / "exit_entries-1.0.dist-info"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: exit-entries\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[harness.regressions]\ninstalled-os-exit = exit_entries:REGRESSION\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    for name, value in [("_entries", {}), ("_origins", {}), ("_loaded", False)]:
        monkeypatch.setattr(registry, name, value)
    entry = registry.get_regression("installed-os-exit")
    assert not registry.is_builtin("installed-os-exit") and registry.is_builtin("flashinfer-oom")

    def in_this_process(status: int) -> None:
        raise AssertionError(f"os._exit({status}) ran in the hunt's own process")

    monkeypatch.setattr(os, "_exit", in_this_process)  # the children have the real one
    (tmp_path / "ok.py").write_text("class A:\n    pass\n")
    report = hunt(tmp_path, devices=(), entries=[entry], quick=True)
    rows = {(r.section, r.name): r for r in report.rows}
    catalog = rows[("catalog", "installed-os-exit")]
    assert catalog.misbehaves and "exited with status 0" in report.catalog[0].runs[0].error
    scaling = rows[("scaling", "installed-os-exit (buggy)")]
    assert scaling.verdict == "error" and "exited with status 0" in scaling.detail
    assert not report.ok and len(report.rows) == 5
