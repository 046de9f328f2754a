"""The bisection: git's own choice of midpoints, one check (with retries) per step, in a
temporary worktree.

``bisect(repo, good, bad, check)`` asks read-only ``git rev-list --bisect-all`` for each midpoint,
checks it out in a detached temporary worktree, and records the check's verdict; at the end it
confirms the first bad commit against its parent. Retries, skips and the report's statuses are
described in ``docs/bisect.md``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from harness.bisect.checks import BisectCheck, CheckRun, run_check
from harness.bisect.report import BisectReport, Status, StepRecord
from harness.bisect.verdict import Verdict
from harness.bisect.worktree import Commit, commit, git, resolve, temporary_worktree, toplevel
from harness.errors import HarnessError

Progress = Callable[[str], None]
MAX_TIMEOUT = 1e6
"""Seconds; more would overflow the process wait (and no check runs for 11 days)."""
MAX_RETRIES = 100


def bisect(
    repo: Path,
    good: str,
    bad: str,
    check: BisectCheck,
    *,
    timeout: float | None = None,
    retries: int = 0,
    progress: Progress | None = None,
) -> BisectReport:
    """Find the first commit after ``good`` up to ``bad`` on which ``check`` fails."""
    if retries < 0:
        raise HarnessError("--retries must be 0 or more")
    if retries > MAX_RETRIES:
        raise HarnessError(f"--retries must be at most {MAX_RETRIES}")
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise HarnessError(f"--timeout must be a positive number of seconds, not {timeout:g}")
    if timeout is not None and timeout > MAX_TIMEOUT:
        raise HarnessError(f"--timeout must be at most {MAX_TIMEOUT:.0f} seconds")
    started = time.perf_counter()
    root = toplevel(repo)
    good_sha, bad_sha = resolve(root, good), resolve(root, bad)
    if good_sha == bad_sha:
        raise HarnessError(f"--good and --bad are the same commit ({good_sha[:12]})")
    if git(["merge-base", "--is-ancestor", good_sha, bad_sha], root, ok=(0, 1)).returncode:
        raise HarnessError(f"--good {good} is not an ancestor of --bad {bad}")
    report = BisectReport(
        repo=str(root),
        good=commit(root, good_sha),
        bad=commit(root, bad_sha),
        check=check.name,
        num_commits=int(git(["rev-list", "--count", f"{good_sha}..{bad_sha}"], root).stdout),
    )
    say: Progress = progress or (lambda message: None)
    say(
        f"bisecting {report.num_commits} commits ({good_sha[:12]}..{bad_sha[:12]}) with {check.name}"
    )
    latest_bad, goods, skipped = bad_sha, [good_sha], set[str]()
    with temporary_worktree(root, bad_sha) as tree:
        while True:
            remaining = _candidates(tree, latest_bad, goods)
            untested = [sha for sha in remaining if sha != latest_bad and sha not in skipped]
            if not untested:
                _finish(report, tree, latest_bad, [sha for sha in remaining if sha in skipped])
                break
            sha = untested[0]
            git(["checkout", "--detach", "--quiet", sha], tree)
            steps_left = math.ceil(math.log2(len(untested) + 1)) - 1
            step = _step(check, tree, commit(tree, sha), timeout, retries, report, say, steps_left)
            _clean(tree)
            if step.verdict is Verdict.ABORT or not _can_run(check, root, tree, report, timeout):
                report.status = "aborted"
                report.abort_reason = report.abort_reason or step.runs[-1].note
                break
            if step.verdict is Verdict.GOOD:
                goods.append(sha)
            elif step.verdict is Verdict.BAD:
                latest_bad = sha
            else:
                skipped.add(sha)
        report.skipped = [s.commit for s in report.steps if s.verdict is Verdict.SKIP]
        if report.status == "found":
            _confirm(check, tree, timeout, report, say)
            report.status = _confirmation(report)
    report.seconds = time.perf_counter() - started
    return report


def _candidates(tree: Path, bad: str, goods: list[str]) -> list[str]:
    """Commits that may be the first bad one (``bad`` included), best midpoint first."""
    out = git(["rev-list", "--bisect-all", bad, "--not", *goods], tree).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _finish(report: BisectReport, tree: Path, bad: str, skipped: list[str]) -> None:
    if skipped:
        report.status = "ambiguous"
        report.candidates = [commit(tree, sha) for sha in [*skipped, bad]]
    else:
        report.status = "found"
        report.first_bad = commit(tree, bad)


def _step(
    check: BisectCheck,
    tree: Path,
    target: Commit,
    timeout: float | None,
    retries: int,
    report: BisectReport,
    say: Progress,
    steps_left: int,
) -> StepRecord:
    number = len(report.steps) + 1
    say(f"step {number} (about {steps_left} more after it): {target.short} {target.subject}")
    runs = [run_check(check, tree, timeout)]
    while runs[-1].verdict is Verdict.BAD and runs[-1].started and len(runs) <= retries:
        _clean(tree)
        runs.append(run_check(check, tree, timeout))
    runs[-1] = _settle(check, tree, timeout, report, runs[-1], say)
    report.check_runs += len(runs)
    verdicts = [r.verdict for r in runs]
    flaky = len(set(verdicts)) > 1
    verdict = Verdict.GOOD if flaky and Verdict.GOOD in verdicts else runs[-1].verdict
    step = StepRecord(number, target, verdict, runs, flaky)
    report.steps.append(step)
    say(
        f"step {number}: {verdict.value}{' (flaky)' if flaky else ''} in {step.seconds:.1f} s: {runs[-1].note}"
    )
    return step


def _settle(
    check: BisectCheck,
    tree: Path,
    timeout: float | None,
    report: BisectReport,
    run: CheckRun,
    say: Progress,
) -> CheckRun:
    """A skip whose doubts all hold at both ends is good: what the check cannot judge at the good
    and at the bad commit alike cannot hide the culprit (the overrides check: a file unparsable
    at both ends, a parser's test fixture, say, is judged on the rest of the tree)."""
    if run.verdict is not Verdict.SKIP or not run.doubts:
        return run
    if report.end_doubts is None:
        say("reading what the check cannot judge at the good and the bad commit")
        _clean(tree)
        ends: list[CheckRun] = []
        for end in (report.good, report.bad):
            if end is report.good and report.good_run is not None:
                ends.append(report.good_run)
                continue
            git(["checkout", "--detach", "--quiet", end.sha], tree)
            ends.append(run_check(check, tree, timeout))
            report.check_runs += 1
            _clean(tree)
        report.good_run = ends[0]
        report.end_doubts = ends[0].doubts & ends[1].doubts
    if not run.doubts <= report.end_doubts:
        return run
    note = f"{run.note}, as at both ends: judged on the rest, no error finding"
    return replace(run, verdict=Verdict.GOOD, note=note)


def _can_run(
    check: BisectCheck, root: Path, tree: Path, report: BisectReport, timeout: float | None
) -> bool:
    """``git bisect run``'s guard: a command that could not be executed, or exits with a status
    that may mean "cannot run" (126, 127), is bad only if it runs on the good commit."""
    last = report.steps[-1].runs[-1]
    if report.good_run is not None or _cannot_run(check, last) is None:
        return True
    git(["checkout", "--detach", "--quiet", report.good.sha], tree)
    report.good_run = run_check(check, tree, timeout)
    report.check_runs += 1
    good = report.good_run
    reason = _cannot_run(check, good)
    if reason is not None:
        report.abort_reason = (
            f"{reason} (at {report.steps[-1].commit.short} and at the good commit "
            f"{report.good.short})" + _cannot_run_hint(check, root, tree, good)
        )
        report.steps[-1].verdict = Verdict.ABORT
    _clean(tree)
    return report.abort_reason == ""


def _cannot_run(check: BisectCheck, run: CheckRun) -> str | None:
    """Why ``run`` may say that the check cannot run rather than that the commit is bad."""
    if check.cannot_run_codes and not run.started:
        return run.note
    if run.returncode in check.cannot_run_codes:
        return f"the check exits {run.returncode}"
    if check.cannot_run_text and check.cannot_run_text in run.output:
        return f"the check cannot be executed: {check.cannot_run_text}"
    return None


def _cannot_run_hint(check: BisectCheck, root: Path, tree: Path, run: CheckRun) -> str:
    """Why, where it can be told: a script of the user's that the commits do not hold."""
    program = check.argv[0]
    if check.cannot_run_text:
        return f"; install what is missing for {program}"
    if run.started:
        return ": it cannot run (command not found or not executable?)"
    if "/" not in program and (tree / program).is_file():
        return f"; {program} is not on PATH, but the checkout has one: give -- ./{program}"
    if "/" in program and not os.path.isabs(program):
        if (root / program).is_file() and not (tree / program).exists():
            return (
                f"; {program} is in the repository but not in its commits (untracked?): each "
                f"step runs in a clean checkout, so give its absolute path ({root / program})"
            )
        if (tree / program).is_file() and not os.access(tree / program, os.X_OK):
            return f" (committed without the executable bit: run it as: -- sh {program})"
    return ""


def _clean(tree: Path) -> None:
    """Drop whatever the check wrote, so that git can check out the next commit."""
    git(["reset", "--hard", "--quiet"], tree)
    git(["clean", "-ffdxq"], tree)


def _confirmation(report: BisectReport) -> Status:
    """``found`` when the check fails at the first bad commit and passes at its parent."""
    culprit, parent = report.culprit_run, report.parent_run
    fails = culprit is not None and culprit.verdict is Verdict.BAD
    if fails and (parent is None or parent.verdict is Verdict.GOOD):
        return "found"
    if culprit is not None and culprit.verdict is Verdict.GOOD and report.first_bad == report.bad:
        return "bad-passes"
    return "unconfirmed"


def _confirm(
    check: BisectCheck, tree: Path, timeout: float | None, report: BisectReport, say: Progress
) -> None:
    """The check's output at the culprit and at its parent (run there unless a step did)."""
    assert report.first_bad is not None
    parents = git(["rev-list", "--parents", "-n", "1", report.first_bad.sha], tree).stdout.split()
    report.parent = commit(tree, parents[1]) if len(parents) > 1 else None
    ran = {s.commit.sha: s.runs[-1] for s in report.steps}
    for target, attr in ((report.first_bad, "culprit_run"), (report.parent, "parent_run")):
        if target is None:
            continue
        run: CheckRun | None = ran.get(target.sha)
        if run is None:
            say(f"running the check at {target.short} (for the report)")
            git(["checkout", "--detach", "--quiet", target.sha], tree)
            run = run_check(check, tree, timeout)
            report.check_runs += 1
            run = _settle(check, tree, timeout, report, run, say)
            _clean(tree)
        setattr(report, attr, run)
