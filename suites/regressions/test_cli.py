"""``harness regressions list | show | verify``, including a user's variants from outside the package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main

# A user's module, outside this package: a FlashInfer builder that forgets that a full last page
# holds page_size tokens, an entry holding it against the fixed builder, and the fixed backend.
# Only scenarios where a sequence fills a 16-token block exactly can see it (preemption's decodes
# do; mixed-prefill-decode's sequences stay within one block).
USER_MODULE = """
import torch

from harness.reference.backends.flashinfer import FlashInferBackend, FlashInferMetadataBuilder
from harness.regressions import Regression, Upstream, Variant
from harness.regressions.checks import oracle_check


class LastPageModuloBuilder(FlashInferMetadataBuilder):
    def _compute_paged_kv_last_page_len(self, seq_lens_cpu: torch.Tensor) -> torch.Tensor:
        return (seq_lens_cpu % self.kv_cache_spec.block_size).to(torch.int32)


class LastPageModuloBackend(FlashInferBackend):
    @staticmethod
    def get_builder_cls():
        return LastPageModuloBuilder


class ScratchPerStepBuilder(FlashInferMetadataBuilder):
    # Allocates a scratch copy of one layer's KV cache every step (scales with num_blocks).

    def bind_kv_caches(self, kv_caches):
        self.first_cache = next(iter(kv_caches.values()))

    def _plan(self, attn_metadata):
        self.scratch = torch.empty_like(self.first_cache)
        super()._plan(attn_metadata)


class ScratchPerStepBackend(FlashInferBackend):
    @staticmethod
    def get_builder_cls():
        return ScratchPerStepBuilder


ENTRY = Regression(
    id="last-page-modulo",
    title="a full last page described as empty",
    upstream=(Upstream("issue", 1, "made up for a test:"),),
    bug_class="wrong metadata value",
    component="FlashInferMetadataBuilder._compute_paged_kv_last_page_len",
    buggy=Variant(LastPageModuloBackend),
    fixed=Variant(FlashInferBackend),
    checks=(oracle_check("preemption"),),
    found_upstream="n/a",
    caught_by="the oracle",
)

MISSES = Regression(
    id="misses",
    title="an entry whose check cannot see its bug",
    upstream=(),
    bug_class="n/a",
    component="n/a",
    buggy=Variant(LastPageModuloBackend),
    fixed=Variant(FlashInferBackend),
    checks=(oracle_check("single-prefill"),),
    found_upstream="n/a",
    caught_by="n/a",
)
"""


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    (tmp_path / "my_variants.py").write_text(USER_MODULE)
    return tmp_path


def _harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("harness")
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["regressions", "list"]) == 0
    out = capsys.readouterr().out
    assert "aiter-build-decode-rename  #17483, #17961" in out
    assert main(["regressions", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed) >= 6 and listed[0]["upstream"][0]["url"].startswith("https://github.com/")
    assert main(["regressions", "show", "cascade-prefix-schedule"]) == 0
    out = capsys.readouterr().out
    assert "reported in issue #17276 (https://github.com/vllm-project/vllm/issues/17276)" in out
    assert "how it was found upstream:" in out and "what would have caught it:" in out


def test_verify_json_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["regressions", "verify", "aiter-mla-last-page-len", "--json"]) == 0
    (obj,) = json.loads(capsys.readouterr().out)
    assert obj["id"] == "aiter-mla-last-page-len" and obj["buggy_detected"] is True
    assert obj["fixed_clean"] is True and obj["seconds"] >= 0
    assert main(["regressions", "verify", "no-such-entry"]) == 2
    assert "unknown regression 'no-such-entry'; available:" in capsys.readouterr().err


@pytest.mark.integration
def test_user_variants_end_to_end_through_module_attr(user_dir: Path) -> None:
    """The user's module lives outside the package and is found from the working directory."""
    run = _harness(
        "regressions", "verify", "--regression", "my_variants:ENTRY", "--json", cwd=user_dir
    )
    assert run.returncode == 0, run.stderr
    (obj,) = json.loads(run.stdout)
    assert obj["id"] == "last-page-modulo" and obj["buggy_detected"] and obj["fixed_clean"]
    assert "differs from dense" in obj["checks"][0]["detail"]


def test_misbehaving_entries_and_bad_specs_exit_non_zero(
    user_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(user_dir)
    monkeypatch.delitem(sys.modules, "my_variants", raising=False)
    assert main(["regressions", "verify", "--in-process", "my_variants:MISSES"]) == 1
    out = capsys.readouterr().out
    assert "misses" in out and "NOT AS EXPECTED" in out and "0 of 1 behave" in out
    assert main(["regressions", "verify", "--regression", "my_variants:Nope"]) == 2  # in a child
    err = capsys.readouterr().err
    assert "harness: error: --regression 'my_variants:Nope': my_variants has no attribute" in err


def test_a_user_backend_runs_the_generic_checks(
    user_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(user_dir)
    monkeypatch.delitem(sys.modules, "my_variants", raising=False)
    args = ["my_variants:LastPageModuloBackend", "--json", "--in-process"]
    assert main(["regressions", "verify", *args]) == 1
    (obj,) = json.loads(capsys.readouterr().out)
    verdicts = {c["check"]: c["verdict"] for c in obj["checks"]}
    assert obj["kind"] == "variant" and obj["buggy_detected"] is None
    assert verdicts["overrides"] == "pass" and verdicts["oracle:mixed-prefill-decode"] == "pass"
    assert verdicts["oracle:preemption"] == "FAIL"  # a decode fills its 16-token block
    assert verdicts["scaling"] == "pass" and verdicts["simulate:h100-95"] == "pass"
    assert not any(name.startswith("oracle:hybrid") for name in verdicts)  # FlashInfer: no hybrid


def test_the_scaling_report_names_a_users_allocation(
    user_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``harness memory scaling --regression MODULE:ATTR`` runs in its child, run here."""
    from harness.simulation.cli import scaling_report

    monkeypatch.chdir(user_dir)
    monkeypatch.delitem(sys.modules, "my_variants", raising=False)
    options = {
        "model": "tiny",
        "workload": "tiny",
        "regression": "my_variants:ScratchPerStepBackend",
        "num_blocks": [64, 128],
        "device": "meta",
        "dtype": "bfloat16",
        "max_steps": 2,
        "json": False,
    }
    code, text = scaling_report(options)
    assert code == 1
    assert "my_variants.py:" in text and "self.scratch = torch.empty_like(self.first_cache)" in text


@pytest.mark.integration
def test_memory_commands_take_a_users_backend(
    user_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``harness memory scaling --regression MODULE:ATTR`` through the resolver harness.cli hands
    the memory tools: the user's per-step scratch copy is named with its file and line."""
    monkeypatch.chdir(user_dir)
    monkeypatch.delitem(sys.modules, "my_variants", raising=False)
    args = ["memory", "scaling", "--regression", "my_variants:ScratchPerStepBackend"]
    assert main([*args, "--max-steps", "2"]) == 1
    out = capsys.readouterr().out
    assert "my_variants.py:" in out and "self.scratch = torch.empty_like(self.first_cache)" in out
    assert main(["memory", "scaling", "--regression", "my_variants:ENTRY", "--max-steps", "2"]) == 0
    capsys.readouterr()
    assert main(["memory", "simulate", "--regression", "my_variants:function"]) == 2
    assert "has no attribute 'function'" in capsys.readouterr().err


def test_a_variant_that_calls_sys_exit_fails_its_checks_and_the_report_is_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``sys.exit(0)`` in a user's builder: exit 1 with every result printed, never exit 0
    (in the child too: the same ``run_check`` catches it there)."""
    args = ["suites.regressions.variants:EXITING", "--json", "--in-process"]
    assert main(["regressions", "verify", *args]) == 1
    (obj,) = json.loads(capsys.readouterr().out)
    errors = [c for c in obj["checks"] if c["verdict"] == "error"]
    assert errors and all("sys.exit(0)" in c["detail"] for c in errors)


OS_EXIT_MODULE = """
import os

from harness.reference.backends.flashinfer import FlashInferBackend, FlashInferMetadataBuilder


class OsExitBuilder(FlashInferMetadataBuilder):
    def build(self, *args, **kwargs):
        os._exit({status})


class OsExitBackend(FlashInferBackend):
    @staticmethod
    def get_builder_cls():
        return OsExitBuilder
"""


@pytest.mark.parametrize("status", [0, pytest.param(3, marks=pytest.mark.integration)])
def test_a_variant_that_calls_os_exit_is_a_check_error_never_the_runs_status(
    status: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``os._exit()`` cannot be caught in the process: user code runs in a child, whose death
    is reported as an error of the check that was running (exit 1, the results printed)."""
    (tmp_path / "exit_variants.py").write_text(OS_EXIT_MODULE.format(status=status))
    monkeypatch.chdir(tmp_path)
    assert main(["regressions", "verify", "exit_variants:OsExitBackend", "--json"]) == 1
    (obj,) = json.loads(capsys.readouterr().out)
    (run,) = [c for c in obj["checks"] if c["verdict"] == "error"]
    assert run["check"].startswith("oracle:") and not obj["ok"]
    assert run["detail"].startswith(
        f"the process exited with status {status} before returning (os._exit(), or a crash in "
        "native code), while this check ran; the checks after it did not run"
    )


def test_a_module_that_calls_os_exit_on_import_is_an_error_naming_the_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "dies_on_import.py").write_text("import os\nos._exit(0)\n")
    monkeypatch.chdir(tmp_path)
    assert main(["regressions", "verify", "dies_on_import:Backend", "--json"]) == 1
    (obj,) = json.loads(capsys.readouterr().out)
    (run,) = obj["checks"]
    assert run["check"] == "(the import of dies_on_import)" and run["verdict"] == "error"
    assert run["detail"].startswith("the process exited with status 0 before returning")
