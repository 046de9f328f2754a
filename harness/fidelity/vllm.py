"""vLLM's compared modules, loaded from a source tree inside a sandbox, for the differentials."""

from __future__ import annotations

import types
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from harness.errors import HarnessError
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
        """vLLM's module ``vllm.<name>``, e.g. ``module("v1.kv_cache_interface")``.

        Only modules loaded from source or given an explicit stub: a differential that asks for
        anything else would be comparing against an automatic stub, so that is an error.
        """
        full = f"vllm.{name}"
        if full not in self.sandbox.real and full not in self.sandbox.stubs:
            raise RuntimeError(f"{full} is neither loaded from source nor an explicit stub")
        return self.sandbox.load(full)


@contextmanager
def open_vllm(
    source: VllmSource, modules: Sequence[str] = REAL_MODULES
) -> Generator[VllmCode, None, None]:
    """Load vLLM's ``modules`` from ``source`` for the duration of the ``with`` block."""
    recorder = PlanRecorder()
    with VllmSandbox(source.root, modules, make_stubs(source.root, recorder)) as sandbox:
        code = VllmCode(source, sandbox, recorder)
        for name in modules:  # load everything now: a broken tree fails before any trial
            try:
                sandbox.load(name)
            except Exception as exc:
                raise HarnessError(
                    f"cannot load {name} from {source.root} (vLLM {source.version}): "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        yield code
