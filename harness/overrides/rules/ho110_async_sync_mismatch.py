"""HO110 async-sync-mismatch

## What it does
Reports an ``async def`` override of a plain method, or a plain override of an ``async def``.

## Why it matters
Callers of an async base ``await`` the result, which a sync override's value does not support
(``TypeError: object ... can't be used in 'await' expression``); callers of a sync base get a
coroutine and the work never runs. vLLM's ``EngineClient`` (``vllm/engine/protocol.py``) mixes
both, and subclasses must follow it exactly, as ``_build_decode``'s had to in PR #17483.

## Example
```python
class Base:
    async def get_model_config(self): ...

class Sub(Base):
    def get_model_config(self): ...
```

## Use instead
Keep the kind: ``async def get_model_config(self): ...``.

## Limitations
A sync method returning an awaitable is still reported. An ``async def`` that yields (an
async generator, called without ``await``) may override a plain ``def`` returning an
``AsyncGenerator`` and vice versa, as vLLM's ``EngineClient.generate`` is declared. Severity as
for every method-pair rule: ``harness overrides --explain HO101``.

## References
- PEP 492 (coroutines with async and await syntax)
"""

from __future__ import annotations

from harness.overrides.rules._facts import Issue, Pair

CODE = "HO110"
SYMBOL = "async-sync-mismatch"
MESSAGE = "{override}() is {kind} but {base}() is {base_kind}"
DESCRIPTION = "An async method overrides a sync one or the other way round."
SUBJECT = Pair
DRIFT = True

_WORDS = {True: "async", False: "not async"}


def check(pair: Pair) -> list[Issue]:
    base, override = pair.base, pair.override
    if base.is_async is override.is_async or base.is_property:
        return []
    if base.async_generator or override.async_generator:
        return []  # an async generator is called without await, like a plain def
    fields = (("kind", _WORDS[override.is_async]), ("base_kind", _WORDS[base.is_async]))
    return [Issue((), fields)]
