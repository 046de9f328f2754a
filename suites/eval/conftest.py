"""Offline for every eval test: lm-eval, ``datasets`` and the hub must never download."""

from __future__ import annotations

import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"


@pytest.fixture
def no_env_info(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip lm-eval's ``add_env_info`` (``pip list`` in a subprocess, seconds per evaluation)."""
    evaluator = pytest.importorskip("lm_eval.evaluator")
    monkeypatch.setattr(evaluator, "add_env_info", lambda results: None)
