"""HO112 narrowed-catch-all

## What it does
Reports an override with a fixed signature of a base method that takes only ``*args,
**kwargs``, when a call in the project passes it arguments the override rejects, directly or
through a base method forwarding its own ``*args, **kwargs`` to it. An ``error`` when the call
certainly reaches this override, else a warning with the call.

## Why it matters
A catch-all base declares no signature to compare with, so mypy accepts any override, yet
callers pass real arguments. vLLM's ``CustomOp`` declares ``forward_cuda`` and the other
platform slots as ``(self, *args, **kwargs)`` and forwards ``forward_hip`` to it; each layer
fixes its own (``RMSNorm.forward_cuda(self, x, residual=None)`` in 0.9.0). A call passing
``residual=`` to a layer without it fails only on the platforms dispatching there, as vLLM PR
#17483's renamed argument failed only on ROCm.

## Example
```python
class CustomOp:
    def forward_cuda(self, *args, **kwargs): ...
    def forward_hip(self, *args, **kwargs):
        return self.forward_cuda(*args, **kwargs)
    def fused(self, x):
        return self.forward_hip(x, residual=None)

class SiluAndMul(CustomOp):
    def forward_cuda(self, x): ...
```

## Use instead
Accept what callers pass: ``def forward_cuda(self, x, residual=None): ...``.

## Limitations
Without a call that passes a rejected argument nothing is reported: a catch-all base is a
dispatch slot that every override may narrow. Forwarding is followed one step, through a
method whose only parameters are ``*args, **kwargs`` and that passes both on unchanged.

## References
- vLLM ``CustomOp`` dispatch (``vllm/model_executor/custom_op.py``, 0.9.0)
- PEP 3102 (keyword-only arguments); pylint ``arguments-differ`` (W0221)
"""

from __future__ import annotations

from harness.overrides.compare import absorbs_everything, is_catch_all
from harness.overrides.rules._facts import Issue, Pair

CODE = "HO112"
SYMBOL = "narrowed-catch-all"
MESSAGE = "{override}() gives a fixed signature to {base}(*args, **kwargs) and callers pass it arguments it rejects"
DESCRIPTION = "An override fixes the signature of a *args/**kwargs base that callers pass more to."
SUBJECT = Pair
DRIFT = True
NEEDS_EVIDENCE = True


def check(pair: Pair) -> list[Issue]:
    """A catch-all base and an override that does not accept everything (the call that
    shows the rejection is looked up by the analysis: ``NEEDS_EVIDENCE``)."""
    base, override = pair.base, pair.override
    if base.is_property or override.is_property or base.is_async != override.is_async:
        return []
    if not is_catch_all(base) or absorbs_everything(override):
        return []
    return [Issue()]
