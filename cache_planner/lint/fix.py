"""`prefixgate lint --fix`: request files are rewritten by the planner itself, templates get a suggested diff.

A request file is planned exactly as the gateway would plan it on a route's first request
(`plan(conv, Target(provider, model), PlannerState(), "rewrite")`, then the dialect's encoder): volatile
sentences move out of the system prompt, documents move ahead of questions, checkpoints are placed,
and the caller's own checkpoints are kept. The file keeps its indentation style.

Templates are the user's code, so they are never written: the suggestion moves each line holding a
volatile value or a variable after the static lines, keeping Jinja blocks (`{% if %}`...) where they are.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass

from prefixgate.cache_planner.detectors import units, volatile_spans
from prefixgate.cache_planner.lint.inputs import Request, Template
from prefixgate.cache_planner.plan import plan
from prefixgate.cache_planner.stability import PlannerState
from prefixgate.cache_planner.target import Target
from prefixgate.dialects import DIALECTS

# Findings the planner cannot fix: a body the provider rejects is left for the user.
UNFIXABLE = ("PG000",)


def apply_fixes(findings: list) -> list[str]:
    """Fix the request files (.json) and suggest diffs for the templates that have findings; one line
    (or diff) per file, for the report."""
    out: list[str] = []
    done: set[int] = set()
    for f in findings:
        subject = f.subject
        if subject is None or id(subject) in done or f.rule in UNFIXABLE:
            continue
        done.add(id(subject))
        if isinstance(subject, Request) and subject.source.path.suffix == ".json":
            result = fix_request(subject)
            verb = "fixed" if result.changed else "unchanged"
            out.append(f"{verb}: {result.path}" + "".join(f"\n    {n}" for n in result.notes))
        elif isinstance(subject, Template) and _one_piece(subject):
            diff = suggest_template(subject)
            if diff:
                out.append(f"suggested (templates are not rewritten): {subject.label}\n{diff.rstrip()}")
    return out


@dataclass(frozen=True)
class FixResult:
    path: str
    changed: bool
    notes: tuple[str, ...]


def fix_request(req: Request) -> FixResult:
    """Rewrite `req`'s file in place (a plain request file, or a single trace record's body)."""
    display = req.source.display
    if req.conv is None or req.model is None:
        why = req.error or f"{req.model_name!r} is not a known {req.provider} model"
        return FixResult(display, False, (f"not fixed: {why}",))
    result = plan(req.conv, Target(req.provider, req.model.id), PlannerState(), "rewrite")  # type: ignore[arg-type]
    body = DIALECTS[req.provider].encode_request(result.conversation)
    notes = tuple(n for n in result.explanation if n.startswith(("rewrite:", "checkpoint:", "cache:")))
    if body == req.body:
        return FixResult(display, False, notes)
    value = json.loads(req.source.text)
    if req.body_path:
        value[req.body_path[0]] = body
    else:
        value = body
    req.source.path.write_text(_dump(value, req.source.text), encoding="utf-8")
    return FixResult(display, True, notes)


def _dump(value: object, original: str) -> str:
    """JSON in the original file's style: its indentation (or none) and its final newline."""
    m = re.search(r"\n([ \t]+)\S", original)
    if "\n" not in original.strip():
        text = json.dumps(value, ensure_ascii=False)
    else:
        text = json.dumps(value, ensure_ascii=False, indent=m.group(1) if m else 2)
    return text + ("\n" if original.endswith("\n") else "")


_OPEN = re.compile(r"\{%-?\s*(?:if|for|block|macro|call|filter|with|raw)\b")
_CLOSE = re.compile(r"\{%-?\s*end\w*")


def _one_piece(t: Template) -> bool:
    """A diff needs the template's text to be one run of its file: not a Jinja template with includes
    inlined, not a Python prompt assembled from several expressions."""
    if t.python is not None:
        return t.python.contiguous
    return t.expanded is None or t.text == t.source.text


def suggest_template(t: Template) -> str | None:
    """A unified diff moving volatile lines after the static ones, or None when nothing should move."""
    text = t.text
    spans = volatile_spans(text) + t.variables
    moved: list[str] = []
    kept: list[str] = []
    depth, static_after = 0, False
    for u in units(text):
        piece = text[u.start:u.end]
        inside = depth > 0 or "{%" in piece
        depth += len(_OPEN.findall(piece)) - len(_CLOSE.findall(piece))
        volatile = any(s.start < u.end and s.end > u.start for s in spans)
        if volatile and not inside and piece.strip():
            moved.append(piece)
        else:
            kept.append(piece)
            static_after = static_after or bool(moved and piece.strip())
    if not static_after:
        return None
    if kept and not kept[-1].endswith("\n"):
        kept[-1] += "\n"
    new = "".join(kept) + "".join(moved)
    if new == text:
        return None
    label = f"{t.source.display}" + (f" ({t.name})" if t.name else "")
    return "".join(difflib.unified_diff(text.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"a/{label}", f"b/{label}"))

