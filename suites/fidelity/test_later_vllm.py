"""A later vLLM's tree (a small fixture in vLLM 0.34.0's shape): named deviations, unlisted ones,
unnamed differences, and trees outside the supported eras.

``fixtures/fake_vllm_spec_era`` lays its helpers out as 0.34.0 does (``vllm/utils/*.py``, where
0.9.0 read ``vllm/utils.py``) and writes its specs as 0.34.0 does: keyword-only, MLA as a class,
no ``type_id``, merges by class and equal fields, ``head_size_v``, sliding windows sized for the
tokens in flight. The real 0.34.0 run is in ``test_vllm_trees.py`` (integration).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.fidelity import deviation
from harness.reference.config import VllmConfig
from harness.reference.kv_cache_interface import FullAttentionSpec

from .conftest import FIXTURES, write_tree

LATER = str(FIXTURES / "fake_vllm_spec_era")
VERSION = "0.0.1+fake"
SPEC_DEVIATIONS = frozenset(
    {
        "kv-cache-specs/type-id-removed",
        "kv-cache-specs/merge-by-fields",
        "kv-cache-specs/head-size-v",
        "kv-cache-specs/sliding-window-in-flight-tokens",
    }
)
ARGV = ["fidelity", "--vllm-src", LATER, "--only", "kv-cache-specs", "--trials", "150"]


def test_listed_deviations_are_agreement_beyond_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(deviation.LISTED, VERSION, SPEC_DEVIATIONS)
    assert main(ARGV) == 0
    out = capsys.readouterr().out
    assert "150/150" in out and "agree beyond 4 named deviations" in out
    assert (
        f"vLLM {VERSION} removed KVCacheSpec.type_id (layers are grouped by spec class and equal "
        "fields) in vllm/v1/kv_cache_interface.py:17 [kv-cache-specs/type-id-removed]"
    ) in out
    assert "[kv-cache-specs/head-size-v] (explained a difference in" in out
    assert "a setting: compared as the reference runs" in out
    assert "every differential agrees or deviates only as docs/fidelity.md lists" in out


def test_a_deviation_not_listed_for_the_version_fails(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(deviation.LISTED, VERSION, SPEC_DEVIATIONS - {"kv-cache-specs/head-size-v"})
    assert main(ARGV) == 1
    out = capsys.readouterr().out
    assert "UNLISTED DEVIATION" in out and "NOT in agreement: kv-cache-specs" in out
    assert (
        "UNLISTED: kv-cache-specs/head-size-v (vllm/v1/kv_cache_interface.py:32): "
        f"docs/fidelity.md does not list it for vLLM {VERSION}"
    ) in out


def test_an_unnamed_difference_fails_beside_the_named_ones(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(deviation.LISTED, VERSION, SPEC_DEVIATIONS)
    original = FullAttentionSpec.max_memory_usage_bytes

    def one_block_more(self: FullAttentionSpec, vllm_config: VllmConfig) -> int:
        return original(self, vllm_config) + self.page_size_bytes

    monkeypatch.setattr(FullAttentionSpec, "max_memory_usage_bytes", one_block_more)
    assert main(ARGV) == 1
    out = capsys.readouterr().out
    assert "DISAGREE" in out and "first difference beyond the named deviations:" in out
    assert ".max_memory_usage_bytes: vLLM" in out


def test_the_0_9_tree_shows_none_of_them(capsys: pytest.CaptureFixture[str]) -> None:
    fake = str(FIXTURES / "fake_vllm")
    assert main(["fidelity", "--vllm-src", fake, "--only", "kv-cache-specs", "--trials", "50"]) == 0
    out = capsys.readouterr().out
    assert "named deviations of" not in out and "every differential agrees (1 of 1" in out


def _helpers() -> dict[str, str]:
    fake = FIXTURES / "fake_vllm" / "vllm"
    return {
        "vllm/utils.py": (fake / "utils.py").read_text(),
        "vllm/config.py": (fake / "config.py").read_text(),
        "vllm/v1/kv_cache_interface.py": (fake / "v1" / "kv_cache_interface.py").read_text(),
    }


def test_a_tree_outside_the_eras_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    builder = (
        "class FlashAttentionMetadataBuilder:\n"
        "    def __init__(self, runner):\n        pass\n"
        "    def build(self, num_reqs, num_actual_tokens, max_query_len, common_prefix_len):\n"
        "        pass\n"
    )  # vLLM 0.8's V1 builder took the runner alone
    write_tree(
        tmp_path, {**_helpers(), "vllm/v1/attention/backends/flash_attn.py": builder}, "0.8.5"
    )
    assert main(["fidelity", "--vllm-src", str(tmp_path), "--only", "kv-cache-specs"]) == 2
    err = capsys.readouterr().err
    assert "match neither supported era" in err and "__init__(runner) and build(" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_code_a_tree_lacks_with_no_deviation_naming_it_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No BlockTable anywhere, and none of the structures the replacement deviation looks for.
    write_tree(tmp_path, _helpers())
    argv = ["fidelity", "--vllm-src", str(tmp_path), "--only", "block-table-row-ops"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "defines no BlockTable, which the differential runs" in err and "Traceback" not in err


def test_a_module_reading_what_the_stubs_lack_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    specs = _helpers()["vllm/v1/kv_cache_interface.py"]
    reads = "from vllm.platforms import interface\nif interface.NEW_FLAG:\n    pass\n"
    write_tree(tmp_path, {**_helpers(), "vllm/v1/kv_cache_interface.py": reads + specs})
    assert main(["fidelity", "--vllm-src", str(tmp_path), "--only", "kv-cache-specs"]) == 2
    err = capsys.readouterr().err
    assert "cannot load vllm.v1.kv_cache_interface" in err and "interface.NEW_FLAG" in err
    assert "harness/fidelity/stubs.py" in err and len(err.strip().splitlines()) == 1
