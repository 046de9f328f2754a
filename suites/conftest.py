"""Shared pytest setup: one torch thread per worker, each test its own ``TMPDIR``, and pytester
for the plugin tests.

Golden files come from the ``harness_golden`` plugin (``harness/golden_plugin.py``), turned on by
``golden_root`` in pyproject.toml.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
import torch

torch.set_num_threads(1)

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def own_tmpdir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``TMPDIR`` is a fresh directory (beside ``tmp_path``, not in it) for the test and the
    processes it starts, so a test that looks for its own leftovers sees only its own, under
    any ``-n``."""
    path = tmp_path_factory.mktemp("tmpdir")
    monkeypatch.setenv("TMPDIR", str(path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # recomputed from TMPDIR, restored afterwards
    return path
