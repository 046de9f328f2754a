"""Shared pytest setup: one torch thread per worker, each test its own ``TMPDIR``, no network in
the fast tier, and pytester for the plugin tests.

Golden files come from the ``harness_golden`` plugin (``harness/golden_plugin.py``), turned on by
``golden_root`` in pyproject.toml.
"""

from __future__ import annotations

import ipaddress
import os
import socket
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


@pytest.fixture(autouse=True)
def no_network_in_the_fast_tier(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast tier is hermetic: a test not marked ``integration`` that connects to anything
    but this machine fails at once, naming the address (``suites/test_tiers.py`` reads the rest
    of the rules from the code)."""
    if request.node.get_closest_marker("integration") is not None:
        return
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def refuse(sock: socket.socket, address: object) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
            host = str(address[0])
            try:
                local = host == "localhost" or ipaddress.ip_address(host).is_loopback
            except ValueError:
                local = False
            if not local:
                raise OSError(
                    f"no network in the fast tier (connect to {address}): mark the test integration"
                )

    def guarded_connect(sock: socket.socket, address: object) -> None:
        refuse(sock, address)
        connect(sock, address)  # type: ignore[arg-type]

    def guarded_connect_ex(sock: socket.socket, address: object) -> int:
        refuse(sock, address)
        return connect_ex(sock, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", guarded_connect_ex)
