"""Rendering a `LintReport`: human text (file:line:col, source excerpt, colour on a terminal), JSON, and
SARIF 2.1.0 for GitHub code scanning."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from prefixgate.cache_planner.lint.explain import full_description, help_uri
from prefixgate.cache_planner.lint.inputs import Location
from prefixgate.cache_planner.lint.rules import RULES
from prefixgate.cache_planner.lint.run import Finding, LintReport

FORMATS = ("text", "json", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_COLOURS = {"error": "red", "warning": "yellow", "info": "blue"}
_SARIF_LEVELS = {"error": "error", "warning": "warning", "info": "note"}
EXCERPT_WIDTH = 100


def render(report: LintReport, fmt: str, *, colour: bool = False) -> str:
    if fmt == "json":
        return json.dumps(to_json(report), indent=2, ensure_ascii=False)
    if fmt == "sarif":
        return json.dumps(to_sarif(report), indent=2, ensure_ascii=False)
    return to_text(report, colour)


# ---- text ------------------------------------------------------------------------------------------

# How many skipped files the text report names; JSON lists them all.
SKIPPED_SHOWN = 5


def to_text(report: LintReport, colour: bool = False) -> str:
    def style(text: str, **kw: Any) -> str:
        return click.style(text, **kw) if colour else text

    lines: list[str] = []
    for f in report.findings:
        loc = f.location
        head = (f"{style(f'{loc.path}:{loc.line}:{loc.col}', bold=True)}: "
                f"{style(f.rule, fg=_COLOURS[f.severity], bold=True)} {style(f.severity, fg=_COLOURS[f.severity])}: {f.message}")
        lines.append(head)
        excerpt, caret = _excerpt(loc.excerpt, loc.col)
        if excerpt.strip():
            lines.append(f"    {excerpt}")
            lines.append(f"    {' ' * caret}{style('^', fg='green', bold=True)}")
        lines.append(f"    {style('hint:', fg='cyan')} {f.hint}")
    for path, losses in report.losses.items():
        lines.append(f"Estimated money lost in {path} (provider simulator; a request flagged by several rules "
                     "counts for each):")
        for rule_id, loss in losses.items():
            shown = "requests rejected (400)" if loss is None else f"${loss:.4f}"
            lines.append(f"  {rule_id} {RULES[rule_id].name:<32} {shown}")
    lines += list(report.fixed)
    if report.skipped:
        shown = "; ".join(f"{path} ({why})" for path, why in report.skipped[:SKIPPED_SHOWN])
        more = len(report.skipped) - SKIPPED_SHOWN
        lines.append(f"Skipped {len(report.skipped)} file{'s' * (len(report.skipped) != 1)} not readable as prompts or "
                     f"requests: {shown}{f'; and {more} more (--format json lists all)' if more > 0 else ''}")
    lines.append(_summary(report))
    return "\n".join(lines)


def _excerpt(line: str, col: int) -> tuple[str, int]:
    """The source line, cut to a window around `col` when long, and the caret's offset in it."""
    line = line.replace("\t", " ")
    at = max(col - 1, 0)
    if len(line) <= EXCERPT_WIDTH:
        return line, at
    start = max(0, min(at - EXCERPT_WIDTH // 3, len(line) - EXCERPT_WIDTH))
    prefix = "…" if start else ""
    suffix = "…" if start + EXCERPT_WIDTH < len(line) else ""
    return prefix + line[start:start + EXCERPT_WIDTH] + suffix, at - start + len(prefix)


def _summary(report: LintReport) -> str:
    files = f"{report.files} file{'s' * (report.files != 1)}"
    if not report.findings:
        return f"No problems found in {files}."
    parts = ", ".join(f"{report.count(s)} {s}{'s' * (report.count(s) != 1 and s != 'info')}"
                      for s in ("error", "warning", "info"))
    n = len(report.findings)
    return f"Found {n} problem{'s' * (n != 1)} ({parts}) in {files}."


# ---- JSON ------------------------------------------------------------------------------------------

def to_json(report: LintReport) -> dict[str, Any]:
    return {
        "tool": "prefixgate lint",
        "version": _version(),
        "files": report.files,
        "summary": {s: report.count(s) for s in ("error", "warning", "info")},
        "findings": [f.to_dict() for f in report.findings],
        "losses": {path: {r: ("rejected" if v is None else str(v.quantize(Decimal("0.000001")))) for r, v in losses.items()}
                   for path, losses in report.losses.items()},
        "fixed": report.fixed,
        "skipped": [{"path": path, "reason": why} for path, why in report.skipped],
    }


# ---- SARIF 2.1.0 -----------------------------------------------------------------------------------

def to_sarif(report: LintReport) -> dict[str, Any]:
    rules = report.rules
    index = {r.id: i for i, r in enumerate(rules)}
    driver = {
        "name": "prefixgate",
        "semanticVersion": _version(),
        "rules": [{
            "id": r.id,
            "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": full_description(r)},
            "helpUri": help_uri(r),
            "help": {"text": r.hint},
            "defaultConfiguration": {"level": _SARIF_LEVELS[r.severity]},
            "properties": {"tags": ["prompt-caching", "cost"]},
        } for r in rules],
    }
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().resolve().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": [_result(f, index) for f in report.findings],
    }
    if report.losses:
        run["properties"] = {"estimatedLossUsd": to_json(report)["losses"]}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def _physical(loc: Location) -> dict[str, Any]:
    artifact: dict[str, Any] = ({"uri": Path(loc.path).resolve().as_uri()} if Path(loc.path).is_absolute()
                                else {"uri": quote(loc.path), "uriBaseId": "%SRCROOT%"})
    region: dict[str, Any] = {"startLine": loc.line, "startColumn": loc.col}
    if loc.excerpt.strip():
        region["snippet"] = {"text": loc.excerpt}
    return {"artifactLocation": artifact, "region": region}


def _result(f: Finding, index: dict[str, int]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": f.rule,
        "level": _SARIF_LEVELS[f.severity],
        "message": {"text": f"{f.message}. {f.hint}"},
        "locations": [{"physicalLocation": _physical(f.location)}],
        "partialFingerprints": {"prefixgate/v1": _fingerprint(f)},
    }
    if f.related:
        # Later values in the same prefix: the same cause, shown with the finding instead of as findings.
        result["relatedLocations"] = [{"id": i, "physicalLocation": _physical(loc),
                                       "message": {"text": "another value in the same prefix (same cause)"}}
                                      for i, loc in enumerate(f.related, start=1)]
    if f.rule in index:
        result["ruleIndex"] = index[f.rule]
    return result


def _fingerprint(f: Finding) -> str:
    """Stable across unrelated edits: the rule, the file and the flagged line's text (not its number)."""
    key = f"{f.rule}\0{f.location.path}\0{f.location.excerpt.strip()}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _version() -> str:
    try:
        return version("prefixgate")
    except PackageNotFoundError:
        return "0"
