"""Shared pytest setup: one torch thread per worker, and pytester for the plugin tests.

Golden files come from the ``harness_golden`` plugin (``harness/golden_plugin.py``), turned on by
``golden_root`` in pyproject.toml.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

torch.set_num_threads(1)

pytest_plugins = ["pytester"]
