"""vLLM's compared modules, loaded from a source tree inside a sandbox, for the differentials."""

from __future__ import annotations

import types
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass

from harness.fidelity.sandbox import VllmSandbox
from harness.fidelity.source import VllmSource
from harness.fidelity.stubs import REAL_MODULES, PlanRecorder, make_stubs


@dataclass
class VllmCode:
    """The loaded vLLM modules of one source tree and the FlashInfer plan recorder."""

    source: VllmSource
    sandbox: VllmSandbox
    recorder: PlanRecorder

    def module(self, name: str) -> types.ModuleType:
        """vLLM's module ``vllm.<name>``, e.g. ``module("v1.kv_cache_interface")``."""
        return self.sandbox.load(f"vllm.{name}")


@contextmanager
def open_vllm(source: VllmSource) -> Generator[VllmCode, None, None]:
    """Load vLLM's compared modules from ``source`` for the duration of the ``with`` block."""
    recorder = PlanRecorder()
    with VllmSandbox(source.root, REAL_MODULES, make_stubs(source.root, recorder)) as sandbox:
        code = VllmCode(source, sandbox, recorder)
        for name in REAL_MODULES:  # load everything now: a broken tree fails before any trial
            sandbox.load(name)
        yield code
