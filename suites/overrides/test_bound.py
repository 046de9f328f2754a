"""bound: where a bound method a class takes goes, and whether it is called for a subclass."""

from __future__ import annotations

from pathlib import Path

from harness.overrides.checker import CheckOptions, check
from harness.overrides.findings import Finding, Severity


def _findings(tmp_path: Path, source: str) -> list[Finding]:
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    return check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path))).findings


DISPATCH = """\
import sys


class CustomOp:
    def __init__(self):
        self._forward_method = self.dispatch_forward()

    def dispatch_forward(self):
        if sys.platform == "cpu":
            return self.forward_cpu
        return self.forward_cuda

    def forward(self, *args):
        return self._forward_method(*args)

    def forward_cpu(self, x, y):
        return self.forward_native(x, y, True)

    def forward_cuda(self, x, y):
        return x

    def forward_native(self, x, y, fused=False):
        return x


class Rope(CustomOp):
{forward}    def forward_native(self, x, y):
        return x
"""


def _native(tmp_path: Path, source: str) -> list[Finding]:
    return [f for f in _findings(tmp_path, source) if f.method == "forward_native"]


def test_a_bound_method_stored_and_called_only_by_an_overridden_method_does_not_reach(
    tmp_path: Path,
) -> None:
    # As vLLM's CustomOp.dispatch_forward and sglang 0.5.23's BaseFusedOp with
    # Ernie4_5_VLRotaryEmbedding, which overrides forward() without super().
    overridden = "    def forward(self, x, y):\n        return self.forward_cuda(x, y)\n\n"
    (finding,) = _native(tmp_path, DISPATCH.format(forward=overridden))
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.unreached is not None
    (finding,) = _native(tmp_path, DISPATCH.format(forward=""))
    assert finding.severity is Severity.ERROR  # CustomOp.forward calls self._forward_method
    elsewhere = (
        DISPATCH.format(forward=overridden)
        + "\n\ndef run(op, x):\n    return op._forward_method(x, x)\n"
    )
    (finding,) = _native(tmp_path, elsewhere)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert finding.evidence.untyped is not None  # read on another object: latent
