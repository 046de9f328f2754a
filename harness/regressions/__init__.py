"""Named regressions: real bugs vLLM shipped, re-created as variants of the reference.

``REGRESSIONS`` is a plain dict built here from an explicit tuple (no registration by import side
effect); a duplicate name fails at import, an unknown name lists the known ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import HarnessError
from harness.reference.backends.abstract import AttentionBackend
from harness.regressions import flashinfer_oom


@dataclass(frozen=True, slots=True)
class Regression:
    """A regression variant: its name, a one-line summary, the backend that carries it, its story."""

    name: str
    summary: str
    backend: type[AttentionBackend]
    """The attention backend class to run instead of the reference one."""
    doc: str
    """What vLLM shipped, how it manifested, the numbers (the variant module's docstring)."""


def _registry(*regressions: Regression) -> dict[str, Regression]:
    registry: dict[str, Regression] = {}
    for regression in regressions:
        if regression.name in registry:
            raise ValueError(f"duplicate regression name {regression.name!r}")
        registry[regression.name] = regression
    return registry


REGRESSIONS: dict[str, Regression] = _registry(
    Regression(
        name=flashinfer_oom.NAME,
        summary=flashinfer_oom.SUMMARY,
        backend=flashinfer_oom.FlashInferOOMBackend,
        doc=flashinfer_oom.__doc__ or "",
    ),
)
"""Every known regression by name."""


def get_regression(name: str) -> Regression:
    """The regression called ``name``; an unknown name lists the available ones."""
    try:
        return REGRESSIONS[name]
    except KeyError:
        raise HarnessError(
            f"unknown regression {name!r}; available: {', '.join(sorted(REGRESSIONS))}"
        ) from None
