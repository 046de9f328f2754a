"""Analysis of a loaded tree: resolve classes, run the rules, attach proofs, suppress. ``changed``
mode checks the classes of the changed files and every class whose MRO reaches one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from harness.overrides import suppress
from harness.overrides.compare import align, is_exempt_method
from harness.overrides.discover import SourceFile, Unreadable
from harness.overrides.evidence.proofs import EvidenceIndex, Proof
from harness.overrides.facts.callsites import Receiver
from harness.overrides.facts.signature import Signature
from harness.overrides.findings import Difference, Evidence, Finding, Severity
from harness.overrides.model.resolve import ClassInfo, ExternalModules, Project
from harness.overrides.rules import Issue, NoBase, Pair, Rule, RuleSet, Sibling
from harness.overrides.summary import FileSummary

# `cls` in a class method is reported as "self": the implicit first argument either way.
_RECEIVER_WORDS = {
    Receiver.SELF: "self",
    Receiver.SUPER: "super()",
    Receiver.CONSTRUCTED: "constructed",
    Receiver.ANNOTATED: "annotated",
    Receiver.CLS: "self",
}


def analyze(
    files: Iterable[SourceFile],
    summaries: Mapping[str, FileSummary],
    unreadable: Sequence[Unreadable],
    *,
    changed: set[str] | None,
    select: frozenset[str],
    deleted: frozenset[str] = frozenset(),
    external: ExternalModules | None = None,
    sources: Mapping[str, bytes] | None = None,
) -> tuple[list[Finding], int, int]:
    """Findings (suppressed ones removed), number of classes, number checked. ``changed`` holds
    display paths, ``deleted`` the module names of changed files that no longer exist."""
    by_display = {f.display: f for f in files}
    project = Project(
        ((by_display[d], s) for d, s in summaries.items()),
        watch=deleted,
        external=external,
        sources=sources,
    )
    rules = RuleSet(select)
    findings: list[Finding] = []
    scope = _scope(project, changed)
    audit = set(summaries) if changed is None else changed & set(summaries)
    for display, summary in summaries.items():
        if changed is None or display in changed:
            for failure in summary.parse_failures:
                for rule, issue in rules.check(failure):
                    findings.append(located(rule, issue, display, failure.line, failure.col))
    in_scope = {id(c) for c in scope}
    misrooted = [p for c in scope if c.unresolved for p in project.misrooted(c)]
    for problem in [*project.problems, *misrooted]:
        if id(problem.cls) in in_scope:
            cls = problem.cls
            for rule, issue in rules.check(problem):
                where = (cls.module.file.display, cls.summary.line, cls.summary.col)
                findings.append(located(rule, issue, *where, class_name=cls.key))
    evidence = EvidenceIndex(project)
    try:
        for cls in scope:
            findings.extend(_check_class(project, cls, rules, evidence))
            findings.extend(_check_siblings(project, cls, rules, evidence))
    finally:
        evidence.release()
    ignores = {d: s.ignores for d, s in summaries.items() if s.ignores}
    findings, comments = suppress.apply(findings, ignores)
    for comment in comments:
        if comment.path in audit:  # only files whose every class was checked
            for rule, issue in rules.check(comment):
                findings.append(located(rule, issue, comment.path, comment.line, 1))
    for path in unreadable:
        findings.extend(
            located(rule, issue, path.display, 1, 1) for rule, issue in rules.check(path)
        )
    return findings, len(project.classes), len(scope)


def _scope(project: Project, changed: set[str] | None) -> list[ClassInfo]:
    if changed is None:
        return list(project.classes)
    roots = [c for c in project.classes if c.module.file.display in changed]
    roots.extend(c for c in project.affected if c.module.file.display not in changed)
    return [*roots, *project.descendants(*roots)]


def located(
    rule: Rule, issue: Issue, path: str, line: int, col: int, class_name: str | None = None
) -> Finding:
    """A warning at a place (a file, a class, a comment, a baseline entry), with no method
    pair."""
    return Finding(
        path=path,
        line=line,
        col=col,
        code=rule.code,
        symbol=rule.symbol,
        severity=Severity.WARNING,
        message=rule.format(dict(issue.fields)),
        class_name=class_name,
        extra_key=issue.key,
    )


def _check_class(
    project: Project, cls: ClassInfo, rules: RuleSet, evidence: EvidenceIndex
) -> list[Finding]:
    out: list[Finding] = []
    for name, sig in cls.methods.items():
        if is_exempt_method(name) or sig.is_overload:
            continue
        base_cls = project.definer(cls, name, after=cls)
        if base_cls is None:
            if rules.inspect(NoBase):
                found = rules.check(NoBase(sig, project.fully_resolved(cls)))
                out.extend(_method_finding(cls, sig, rule, issue) for rule, issue in found)
            continue
        base = base_cls.methods.get(name)
        if base is None or base.is_overload:
            continue  # overridden attribute, or overload stubs only
        found = rules.check(Pair(base, sig, align(base, sig), _is_protocol(base_cls)))
        drift = [(rule, issue) for rule, issue in found if rule.drift]
        for rule, issue in found:
            if not rule.drift:
                out.append(_drift_finding(cls, base_cls, sig, base, [(rule, issue)], None))
        if drift:
            proofs: list[Proof | None] = [*evidence.proofs(cls, name, sig, base)]
            for proof in proofs or [None]:  # one finding per call site, or one without
                shown = [(r, i) for r, i in drift if proof is not None or not r.needs_evidence]
                if shown:
                    out.append(_drift_finding(cls, base_cls, sig, base, shown, proof))
    return out


def _is_protocol(cls: ClassInfo) -> bool:
    return any(b is not None and b.rpartition(".")[2] == "Protocol" for b in cls.summary.bases)


def _named_first(issues: list[tuple[Rule, Issue]], proof: Proof | None) -> list[tuple[Rule, Issue]]:
    """The issues with the first one whose parameters the proof's ``TypeError`` names (if
    any) moved to the front: it gives the finding its code."""
    if proof is not None:
        for i, (_, issue) in enumerate(issues):
            if any(f"'{p}'" in proof.error for p in issue.params):
                return [issues[i], *issues[:i], *issues[i + 1 :]]
    return issues


def _drift_finding(
    cls: ClassInfo,
    base_cls: ClassInfo,
    sig: Signature,
    base: Signature,
    issues: list[tuple[Rule, Issue]],
    proof: Proof | None,
) -> Finding:
    """One override's drift at one call site (or without one): every difference, together."""
    same_name = cls.qualname == base_cls.qualname  # e.g. a V1 class over its V0 namesake
    names = {
        "override": f"{cls.key if same_name else cls.qualname}.{sig.name}",
        "base": f"{base_cls.key if same_name else base_cls.qualname}.{base.name}",
    }
    ordered = _named_first(issues, proof)
    differences = tuple(
        Difference(
            rule.code, rule.symbol, rule.format({**dict(issue.fields), **names}), issue.params
        )
        for rule, issue in ordered
    )
    severity, said, ev = _evidence(proof, cls)
    message = "; ".join(d.message for d in differences) + said
    primary = differences[0]
    return Finding(
        path=cls.module.file.display,
        line=sig.line,
        col=sig.col + 1,
        code=primary.code,
        symbol=primary.symbol,
        severity=severity,
        message=message,
        class_name=cls.key,
        method=sig.name,
        base_class=base_cls.key,
        base_path=base_cls.module.file.display,
        base_line=base.line,
        params=tuple(dict.fromkeys(p for d in differences for p in d.params)),
        signature=sig.render(f"{cls.qualname}.{sig.name}"),
        base_signature=base.render(f"{base_cls.qualname}.{base.name}"),
        evidence=ev,
        differences=differences,
    )


def _evidence(proof: Proof | None, cls: ClassInfo) -> tuple[Severity, str, Evidence | None]:
    """Severity, message tail and evidence of a finding backed by ``proof`` (if any)."""
    if proof is None:
        return Severity.WARNING, "", None
    ev = Evidence(
        path=proof.module.file.display,
        line=proof.call.line,
        col=proof.call.col,
        text=proof.call.text,
        error=f"TypeError: {proof.error}",
        receiver=_RECEIVER_WORDS[proof.call.receiver],
        unreached=proof.unreached,
        via=proof.via,
        untyped=proof.untyped,
        guards=proof.guards,
    )
    where = f"{ev.path}:{ev.line}" + (f" (through {proof.via})" if proof.via else "")
    if proof.certain:
        only = f", reached only if {' and '.join(proof.guards)}" if proof.guards else ""
        return Severity.ERROR, f"; the call at {where} raises {ev.error}{only}", ev
    if proof.untyped is not None:
        said = (
            f"; the call at {where} would raise {ev.error} for {cls.qualname}, "
            f"but the code does not show that one gets there (latent): {proof.untyped}"
        )
    elif proof.unreached is not None:
        said = (
            f"; the call at {where} would raise {ev.error}, "
            f"but it cannot run for {cls.qualname}: {proof.unreached}"
        )
    else:
        said = f"; a caller typed as a base class at {where} would raise {ev.error}"
    return Severity.WARNING, said, ev


def _check_siblings(
    project: Project, cls: ClassInfo, rules: RuleSet, evidence: EvidenceIndex
) -> list[Finding]:
    """Methods that two unrelated bases of ``cls`` define, where ``cls``'s MRO makes one
    override the other (reported where the two first meet, not in every subclass)."""
    if len(cls.bases) < 2 or not rules.inspect(Sibling):
        return []
    definers: dict[str, list[ClassInfo]] = {}
    for member in project.mro(cls)[1:]:
        for name in member.methods:
            definers.setdefault(name, []).append(member)
    out: list[Finding] = []
    for name, owners in definers.items():
        if len(owners) < 2 or name in cls.methods or is_exempt_method(name):
            continue
        winner_cls = project.definer(cls, name)
        if winner_cls is None or winner_cls is not owners[0]:
            continue  # an attribute of the class, or of an earlier class, hides them
        # The sibling whose definition the winner displaces: the next one in the MRO that is
        # not the winner's own ancestor (those further on are that sibling's own bases).
        loser_cls = next((c for c in owners[1:] if not project.in_mro(c, winner_cls)), None)
        if loser_cls is None or any(
            project.in_mro(winner_cls, b) and project.in_mro(loser_cls, b) for b in cls.bases
        ):
            continue  # ordinary overrides only, or a conflict a base already has
        winner, loser = winner_cls.methods[name], loser_cls.methods[name]
        if winner.is_overload or loser.is_overload:
            continue
        names = {"winner": f"{winner_cls.qualname}.{name}", "loser": f"{loser_cls.qualname}.{name}"}
        pair = Pair(loser, winner, align(loser, winner), _is_protocol(loser_cls))
        differences = tuple(
            f"{rule.symbol}: "
            + rule.format(
                {**dict(issue.fields), "override": names["winner"], "base": names["loser"]}
            )
            for rule, issue in rules.check(pair)
            if not rule.needs_evidence
        )
        for rule, issue in rules.check(Sibling(winner, loser, differences)):
            proofs = evidence.proofs(winner_cls, name, winner, loser, within=cls)
            severity, said, ev = _evidence(proofs[0] if proofs else None, cls)
            fields = {**dict(issue.fields), "cls": cls.qualname, **names}
            out.append(
                Finding(
                    path=cls.module.file.display,
                    line=cls.summary.line,
                    col=cls.summary.col,
                    code=rule.code,
                    symbol=rule.symbol,
                    severity=severity,
                    message=rule.format(fields) + said,
                    class_name=cls.key,
                    method=name,
                    base_class=loser_cls.key,
                    base_path=loser_cls.module.file.display,
                    base_line=loser.line,
                    signature=winner.render(names["winner"]),
                    base_signature=loser.render(names["loser"]),
                    evidence=ev,
                )
            )
    return out


def _method_finding(cls: ClassInfo, sig: Signature, rule: Rule, issue: Issue) -> Finding:
    """A warning about one method that overrides nothing."""
    fields = {**dict(issue.fields), "override": f"{cls.qualname}.{sig.name}"}
    return Finding(
        path=cls.module.file.display,
        line=sig.line,
        col=sig.col + 1,
        code=rule.code,
        symbol=rule.symbol,
        severity=Severity.WARNING,
        message=rule.format(fields),
        class_name=cls.key,
        method=sig.name,
        signature=sig.render(f"{cls.qualname}.{sig.name}"),
    )
