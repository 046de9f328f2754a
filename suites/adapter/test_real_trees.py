"""The engine adapter on the vLLM 0.9.0 and 0.34.0 wheels' sources (``make test-adapter``).

The trees are fetched once into ``~/.cache/harness`` as ``make fidelity`` fetches 0.9.0
(:func:`harness.vllm_tree.fetch.fetch_vllm_source`); every test starts child processes and runs
minutes, so they carry the ``vllm_trees`` marker (and ``integration``): ``make test-adapter``
runs them, CI runs that target.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.adapter.backends import DEFAULT_BACKENDS
from harness.vllm_tree.fetch import fetch_vllm_source

pytestmark = [pytest.mark.integration, pytest.mark.vllm_trees]

VERSIONS = ("0.9.0", "0.34.0")


def _tree(version: str) -> Path:
    return fetch_vllm_source(version).root


def _harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_scaling_runs_every_backend_of_the_tree_and_says_what_it_found(version: str) -> None:
    done = _harness("memory", "scaling", "--vllm-src", str(_tree(version)))
    assert done.returncode in (0, 1), done.stdout + done.stderr
    reported = re.findall(r"^(\w+): ", done.stdout, re.MULTILINE)
    tree_backends = [b for b in DEFAULT_BACKENDS if b in reported]
    assert {"FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "TRITON_MLA"} <= set(tree_backends)
    assert "OK: nothing but the KV cache grows with num_blocks" in done.stdout
    assert "not covered: the impl's forward" in done.stdout


@pytest.mark.parametrize(
    ("version", "module", "anchor"),
    [
        (
            "0.34.0",
            "vllm/v1/attention/backends/flashinfer.py",
            "        self.qo_indptr_prefill = torch.zeros(",
        ),
        (
            "0.9.0",
            "vllm/v1/attention/backends/flashinfer.py",
            "        self.global_hyperparameters: Optional[PerLayerParameters] = None",
        ),
    ],
)
def test_an_allocation_sized_by_num_gpu_blocks_in_a_real_builder_is_named(
    tmp_path: Path, version: str, module: str, anchor: str
) -> None:
    copy = tmp_path / f"vllm-{version}"
    shutil.copytree(_tree(version) / "vllm", copy / "vllm")
    path = copy / module
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(anchor))
    config = "vllm_config" if version != "0.9.0" else "runner.vllm_config"
    injected = (
        f"        self._per_block = torch.empty({config}.cache_config.num_gpu_blocks * 512)\n"
    )
    lines.insert(at, injected)
    path.write_text("".join(lines))
    done = _harness(
        "memory", "scaling", "--vllm-src", str(copy), "--backend", "FLASHINFER", "--max-steps", "20"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f"{module}:{at + 1}: aten.empty.memory_format grows 2048 bytes/block, once" in done.stdout
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_diff_of_a_tree_with_itself_exits_0(version: str) -> None:
    tree = str(_tree(version))
    done = _harness(
        "diff",
        "--base",
        tree,
        "--head",
        tree,
        "--backend",
        "FLASH_ATTN",
        "--backend",
        "FLASHINFER",
        "--backend",
        "TRITON_MLA",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("same over 200 steps") == 3


def test_the_seeds_rename_put_back_into_aiter_mla_fails_with_the_type_error(
    tmp_path: Path,
) -> None:
    head = tmp_path / "head"
    shutil.copytree(_tree("0.9.0") / "vllm", head / "vllm")
    path = head / "vllm/v1/attention/backends/mla/rocm_aiter_mla.py"
    text = path.read_text()
    start = text.index("    def _build_decode(self, block_table_tensor")
    end = text.index("\n    def ", start + 1)
    renamed = text[start:end].replace("block_table_tensor", "block_table")
    path.write_text(text[:start] + renamed + text[end:])
    done = _harness(
        "diff", "--base", str(_tree("0.9.0")), "--head", str(head), "--backend", "ROCM_AITER_MLA"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "head: TypeError: AiterMLAMetadataBuilder._build_decode() got an unexpected keyword "
        "argument 'block_table_tensor' (raised at vllm/v1/attention/backends/mla/common.py:548)"
    ) in done.stdout
