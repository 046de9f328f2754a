"""What a catalog entry is: a real regression, its buggy and fixed variants as code, its checks.

An entry names the upstream references it was reconstructed from, the class of bug, the component
it perturbs, and checks that must each *fail* on the buggy variant and *pass* on the fixed one
(:func:`harness.regressions.verify.verify` runs both). Imports nothing heavy: the variant classes
are annotations only here, so ``harness --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.reference.backends.abstract import AttentionBackend
    from harness.reference.runner import ModelRunner

VLLM_REPO = "https://github.com/vllm-project/vllm"


@dataclass(frozen=True, slots=True)
class Upstream:
    """One upstream reference: a vLLM pull request or issue and what it was to the bug."""

    kind: Literal["PR", "issue"]
    number: int
    role: str
    """E.g. ``introduced by``, ``fixed by``, ``reported in``, ``backported by``."""

    @property
    def url(self) -> str:
        return f"{VLLM_REPO}/{'pull' if self.kind == 'PR' else 'issues'}/{self.number}"

    def __str__(self) -> str:
        return f"{self.role} {self.kind} #{self.number}"


@dataclass(frozen=True, slots=True)
class Variant:
    """Code that runs in place of the reference: an attention backend and, rarely, a runner."""

    backend: type[AttentionBackend]
    runner: type[ModelRunner] | None = None
    """A :class:`~harness.reference.runner.ModelRunner` subclass, for bugs in the runner itself;
    ``None`` runs the reference runner."""

    @property
    def label(self) -> str:
        names = [self.backend.__name__] + ([self.runner.__name__] if self.runner else [])
        return " + ".join(names)


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """What one check saw on one variant."""

    failed: bool
    """True when the check found the bug (it *should* on the buggy variant)."""
    detail: str
    """What it saw, for ``show``/``verify`` and the hunt report (the error, the finding, ...)."""


@dataclass(frozen=True, slots=True)
class Check:
    """A named check that runs one variant and says whether it found the bug."""

    name: str
    description: str
    run: Callable[[Variant], CheckOutcome]
    """Raises only on an internal error, which verification reports as such (never as a find)."""


@dataclass(frozen=True)
class Regression:
    """A catalog entry: a real regression re-created as a buggy and a fixed variant of the reference."""

    id: str
    title: str
    upstream: tuple[Upstream, ...]
    bug_class: str
    """E.g. ``signature drift``, ``memory scaling``, ``wrong metadata``."""
    component: str
    """What the variant perturbs, e.g. ``MLACommonMetadataBuilder._build_decode override``."""
    buggy: Variant
    fixed: Variant
    checks: tuple[Check, ...]
    found_upstream: str
    """How it was found upstream (what the references say, nothing more)."""
    caught_by: str
    """The test that would have caught it before merge."""
    doc: str = ""
    """The long story: what shipped, how it manifested, how the variant reproduces it."""

    def __post_init__(self) -> None:
        if not self.id or not self.id.replace("-", "").isalnum() or self.id != self.id.lower():
            raise HarnessError(f"regression id {self.id!r} must be lower-case kebab-case")
        if not self.checks:
            raise HarnessError(f"regression {self.id!r} has no checks")
        names = [c.name for c in self.checks]
        if len(set(names)) != len(names):
            raise HarnessError(f"regression {self.id!r} has two checks with one name: {names}")

    @property
    def backend(self) -> type[AttentionBackend]:
        """The buggy variant's backend, for ``memory simulate`` / ``memory scaling``."""
        if self.buggy.runner is not None:
            raise HarnessError(
                f"regression {self.id!r} perturbs the model runner ({self.buggy.runner.__name__}), "
                "not an attention backend; run `harness regressions verify "
                f"{self.id}` instead"
            )
        return self.buggy.backend
