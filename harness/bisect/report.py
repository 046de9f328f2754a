"""What a bisection found: the first bad commit, each step, skipped commits, the check's output
at the culprit and at its parent. ``format()`` is the text report, ``to_dict()`` the ``--json``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from harness.bisect.checks import CheckRun
from harness.bisect.verdict import Verdict
from harness.bisect.worktree import Commit

Status = Literal["running", "found", "bad-passes", "unconfirmed", "ambiguous", "aborted"]
"""``found``: the first bad commit, where the check fails and passes at its parent;
``bad-passes``: the check passes at ``--bad`` (every tested commit was good: nothing to bisect);
``unconfirmed``: the bisection ended on a commit, but the check did not fail there and pass at
its parent when re-run (a flaky check, or ``--good``/``--bad`` that do not bracket the change);
``ambiguous``: only skipped commits are left; ``aborted``: the check stopped the bisection."""


@dataclass
class StepRecord:
    """One tested commit: its verdict and every run of the check on it."""

    number: int
    commit: Commit
    verdict: Verdict
    runs: list[CheckRun]
    flaky: bool
    """The runs disagreed (a retry passed after a failure)."""

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.runs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.number,
            "sha": self.commit.sha,
            "subject": self.commit.subject,
            "verdict": self.verdict.value,
            "flaky": self.flaky,
            "seconds": round(self.seconds, 3),
            "runs": [r.to_dict() for r in self.runs],
        }


@dataclass
class BisectReport:
    """The whole bisection."""

    repo: str
    good: Commit
    bad: Commit
    check: str
    num_commits: int
    """Commits after ``good`` up to and including ``bad``."""
    status: Status = "running"
    first_bad: Commit | None = None
    """Where the bisection ended (the first bad commit when ``status`` is ``found``)."""
    candidates: list[Commit] = field(default_factory=list[Commit])
    """When only skipped commits are left: the commits the first bad one could be."""
    steps: list[StepRecord] = field(default_factory=list[StepRecord])
    skipped: list[Commit] = field(default_factory=list[Commit])
    parent: Commit | None = None
    culprit_run: CheckRun | None = None
    parent_run: CheckRun | None = None
    good_run: CheckRun | None = None
    """The check on the good commit, run only to tell "cannot run" (126, 127) from bad, or to
    read its doubts (below)."""
    end_doubts: frozenset[str] | None = None
    """What the check could not judge at the good and at the bad commit alike; read (two runs)
    only when a step skips for doubts of its own."""
    abort_reason: str = ""
    check_runs: int = 0
    """Every run of the check, retries and the report's runs at culprit and parent included."""
    seconds: float = 0.0

    @property
    def confirmed(self) -> bool:
        """The check fails at the first bad commit and passes at its parent."""
        return self.status == "found"

    def to_dict(self) -> dict[str, Any]:
        def run(r: CheckRun | None) -> dict[str, Any] | None:
            return None if r is None else {**r.to_dict(), "output": r.output}

        return {
            "status": self.status,
            "first_bad": None if self.first_bad is None else self.first_bad.sha,
            "culprit": None if self.first_bad is None else asdict(self.first_bad),
            "parent": None if self.parent is None else asdict(self.parent),
            "confirmed": self.confirmed,
            "candidates": [c.sha for c in self.candidates],
            "steps": [s.to_dict() for s in self.steps],
            "skipped": [c.sha for c in self.skipped],
            "culprit_check": run(self.culprit_run),
            "parent_check": run(self.parent_run),
            "abort_reason": self.abort_reason or None,
            "check": self.check,
            "repo": self.repo,
            "good": self.good.sha,
            "bad": self.bad.sha,
            "num_commits": self.num_commits,
            "check_runs": self.check_runs,
            "seconds": round(self.seconds, 3),
        }

    def format(self) -> str:
        lines = [
            f"bisect {self.repo}: {self.good.short}..{self.bad.short} ({self.num_commits} commits), "
            f"check: {self.check}",
        ]
        for s in self.steps:
            tries = (
                f" ({len(s.runs)} runs{', flaky' if s.flaky else ''})" if len(s.runs) > 1 else ""
            )
            lines.append(
                f"  step {s.number:>2}  {s.commit.short}  {s.verdict.value:<5} {s.seconds:7.2f} s"
                f"{tries}  {s.commit.subject}"
            )
        if self.status == "bad-passes":
            lines.append(
                f"NOT FOUND: the check passes at --bad {self.bad.short} (and at every commit "
                "tested): nothing to bisect; is --bad right, or does the check detect the bug?"
            )
        elif self.status in ("found", "unconfirmed") and self.first_bad is not None:
            c = self.first_bad
            lines += [
                f"first bad commit: {c.sha}",
                f"  subject: {c.subject}",
                f"  author:  {c.author}",
                f"  date:    {c.date}",
            ]
            if not self.confirmed:
                lines.append(
                    "  UNCONFIRMED: the check does not fail at this commit and pass at its parent "
                    "(a flaky check, or --good/--bad that do not bracket the change)"
                )
        elif self.status == "ambiguous":
            lines.append("no single first bad commit: only skipped commits are left; it is one of")
            lines += [f"  {c.short}  {c.subject}" for c in self.candidates]
        elif self.status == "aborted":
            last = self.steps[-1].runs[-1] if self.steps else None
            lines.append(f"ABORTED: {self.abort_reason or (last.note if last else '')}")
        if self.skipped:
            lines.append(f"skipped ({len(self.skipped)}):")
            lines += [f"  {c.short}  {c.subject}" for c in self.skipped]
        culprit = "--bad" if self.status == "bad-passes" else "the first bad commit"
        for label, target, run in (
            (culprit, self.first_bad, self.culprit_run),
            ("its parent", self.parent, self.parent_run),
        ):
            if target is not None and run is not None:
                lines.append(f"check at {label} {target.short}: {run.verdict.value} ({run.note})")
                lines += [f"  | {line}" for line in run.output.rstrip().splitlines()[-20:]]
        lines.append(f"{self.check_runs} check runs in {self.seconds:.1f} s")
        return "\n".join(lines)
