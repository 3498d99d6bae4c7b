"""`prefixgate lint`: find prompt shapes that defeat prefix caching, before they ship.

`lint_paths(paths, config)` reads every request, trace and template under `paths` (`lint_inputs`), runs
the rules (`lint_rules`), drops what the config or an inline comment suppresses, and for traces
estimates the money each rule loses (`lint_cost`). The result is a `LintReport` of `Finding`s, which
`lint_output` renders as text, JSON or SARIF.

Inline suppression, in any file that can hold a comment: a line containing
`prefixgate: disable=PG001,PG002` (or `=all`) silences those rules on that line and the next;
`prefixgate: disable-file=PG001` silences them in the whole file. In Jinja write it as a comment
(`{# prefixgate: disable=PG001 #}`) so it never reaches the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from prefixgate.cache_planner.lint.config import SEVERITIES, LintConfig, LintUsageError, Severity
from prefixgate.cache_planner.lint.fix import apply_fixes
from prefixgate.cache_planner.lint.inputs import (
    Location,
    Request,
    Subject,
    Template,
    discover,
    matches,
    read_subjects,
)
from prefixgate.cache_planner.lint.rules import RULES, Context, Hit, Rule
from prefixgate.errors import RequestError
from prefixgate.providers.pricing import resolve_model
from prefixgate.providers.rules import default_catalog

_SUPPRESS = re.compile(r"prefixgate:\s*disable(-file)?\s*=\s*([A-Za-z0-9_, ]+)")


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    message: str
    hint: str
    location: Location
    data: dict[str, Any] = field(default_factory=dict, compare=False)
    subject: Subject | None = field(default=None, compare=False, repr=False)
    related: tuple[Location, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        loc = self.location
        out = {"rule": self.rule, "name": RULES[self.rule].name, "severity": self.severity, "message": self.message,
               "hint": self.hint, "path": loc.path, "line": loc.line, "col": loc.col}
        if self.related:
            out["related"] = [{"path": r.path, "line": r.line, "col": r.col} for r in self.related]
        return out


@dataclass
class LintReport:
    findings: list[Finding]
    files: int
    rules: list[Rule]
    # Trace file -> rule id -> estimated dollars lost (None: the provider rejects those requests).
    losses: dict[str, dict[str, Decimal | None]] = field(default_factory=dict)
    fixed: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)   # (file, why) a directory walk left out

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def fails(self, fail_on: str) -> bool:
        if fail_on == "never":
            return False
        worst = SEVERITIES.index(fail_on)  # type: ignore[arg-type]
        return any(SEVERITIES.index(f.severity) <= worst for f in self.findings)


def lint_paths(paths: Sequence[str], config: LintConfig, *, cost: bool = True, fix: bool = False,
               force_exclude: bool = False) -> LintReport:
    """Lint every file under `paths`; with `fix`, rewrite flagged request files with the planner first
    and suggest diffs for flagged templates. Raises `LintUsageError` for a bad path, file or setting."""
    subjects, files, skipped = collect(paths, config, force_exclude)
    if fix:
        first = lint_subjects(subjects, config, files=files, cost=False)
        notes = apply_fixes(first.findings)
        subjects, files, skipped = collect(paths, config, force_exclude)
    report = lint_subjects(subjects, config, files=files, cost=cost)
    report.skipped = skipped
    if fix:
        report.fixed = notes
    return report


def collect(paths: Sequence[str], config: LintConfig, force_exclude: bool = False
            ) -> tuple[list[Subject], int, list[tuple[str, str]]]:
    """The subjects under `paths`, the number of files read, and (file, reason) for each file a walk
    found but could not read as what its name says: a repository holds data files, fixtures and
    generated files the user never wrote as prompts, and one of them must not abort the run."""
    files = discover(list(paths), config, force_exclude)
    # Files named on the command line must be what they claim; with force_exclude they are filtered
    # like a directory walk's, and a JSON file that is not a request is skipped.
    named = set() if force_exclude else {str(Path(p)) for p in paths}
    subjects: list[Subject] = []
    skipped: list[tuple[str, str]] = []
    for path, display in files:
        try:
            subjects += read_subjects(path, display, config, named=str(path) in named)
        except LintUsageError as e:
            if str(path) in named:
                raise
            skipped.append((display, str(e).removeprefix(f"{display}").lstrip(":0123456789 ")))
    # A fragment that another template includes, extends or imports is judged in that prompt, not alone.
    used = {ref for s in subjects if isinstance(s, Template) for ref in s.references}
    subjects = [s for s in subjects if not (isinstance(s, Template) and s.source.path.resolve() in used)]
    return subjects, len(files) - len(skipped), skipped


def lint_subjects(subjects: list[Subject], config: LintConfig, *, files: int, cost: bool = True) -> LintReport:
    catalog = default_catalog()
    try:
        template_model = resolve_model(config.provider, config.model, catalog)
    except RequestError:
        raise LintUsageError(f"model {config.model!r} is not a known {config.provider} model "
                             f"(set [tool.prefixgate.lint] provider and model)") from None
    requests = [s for s in subjects if isinstance(s, Request)]
    ctx = Context(config, catalog, template_model, requests)
    active = [r for r in RULES.values() if config.active(r.id)]
    hits: list[tuple[Rule, Hit]] = []
    for r in active:
        if "corpus" in r.scope:
            hits += [(r, h) for h in r.check(requests, ctx)]
        for subject in subjects:
            if ("request" in r.scope and isinstance(subject, Request)) or ("template" in r.scope and isinstance(subject, Template)):
                hits += [(r, h) for h in r.check(subject, ctx)]
    kept = [(r, h) for r, h in hits if not _suppressed(r.id, h, config)]
    # Evidence decides a hit's severity first: a value nothing shows to change stays `info`.
    findings = [Finding(r.id, h.severity or config.severity.get(r.id, r.severity), h.message, r.hint, h.location,
                        h.data, h.subject, h.related) for r, h in kept]
    findings.sort(key=lambda f: (f.location.path, f.location.line, f.location.col, f.rule))
    report = LintReport(_collapse_traces(findings), files, sorted(active, key=lambda r: r.id))
    if cost:
        from prefixgate.cache_planner.lint.cost import trace_losses

        report.losses = trace_losses(requests, kept, catalog)
    return report


def _collapse_traces(findings: list[Finding]) -> list[Finding]:
    """One finding per rule and route of a trace, counting the records it stands for: a trace of
    10,000 requests from one template would otherwise repeat the same finding 10,000 times."""
    first: dict[tuple[str, str, str], int] = {}
    more: dict[int, int] = {}
    out: list[Finding] = []
    for f in findings:
        s = f.subject
        if isinstance(s, Request) and s.record is not None and s.source.path.suffix == ".jsonl":
            key = (f.location.path, f.rule, s.record.route)
            if key in first:
                more[first[key]] = more.get(first[key], 0) + 1
                continue
            first[key] = len(out)
        out.append(f)
    for i, n in more.items():
        route = out[i].subject.record.route  # type: ignore[union-attr]
        out[i] = replace(out[i], message=f"{out[i].message} (and {n} more record{'s' * (n != 1)} of route {route!r})",
                         data={**out[i].data, "records": n + 1})
    return out


def _suppressed(rule: str, hit: Hit, config: LintConfig) -> bool:
    loc = hit.location
    if any(rule in ids for glob, ids in config.per_file_ignores.items() if matches(glob, loc.path)):
        return True
    source = hit.subject.source
    if "prefixgate:" not in source.text:
        return False
    lines = source.text.splitlines()
    for number, line in enumerate(lines, start=1):
        for m in _SUPPRESS.finditer(line):
            ids = {i.strip().upper() for i in m.group(2).split(",")}
            if (rule in ids or "ALL" in ids) and (m.group(1) or number in (loc.line, loc.line - 1)):
                return True
    return False
