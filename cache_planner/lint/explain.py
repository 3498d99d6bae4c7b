"""Rule documentation, written once in each rule's docstring and rendered from there: `prefixgate lint
--explain PG001`, the rules section of docs/lint-rules.md (`python -m prefixgate.cache_planner.lint.explain
docs/lint-rules.md` rewrites it; a test checks it is current) and SARIF's `fullDescription`/`helpUri`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from prefixgate.cache_planner.lint.rules import RULES, Rule

SECTIONS = ("What it does", "Why it matters", "Example", "Use instead")
# Where the generated rules documentation is published; SARIF viewers link each rule there.
DOCS_URL = "https://github.com/prefixgate/prefixgate/blob/main/docs/lint-rules.md"
START, END = "<!-- rules: generated from the rules' docstrings; do not edit -->", "<!-- rules: end -->"


class UnknownRule(LookupError):
    """`--explain` was given a code that is no rule."""


def sections(rule: Rule) -> dict[str, str]:
    """The docstring's sections by heading (each rule has all four; a test checks it)."""
    parts = re.split(r"^## (.+)$", rule.doc, flags=re.M)
    return {title.strip(): body.strip() for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def explain(code: str) -> str:
    """The rule's documentation as a terminal shows it. Raises `UnknownRule` naming the known codes."""
    rule = RULES.get(code.strip().upper())
    if rule is None:
        raise UnknownRule(f"unknown rule {code!r} (rules: {', '.join(sorted(RULES))})")
    return f"{rule.id} {rule.name} ({rule.severity})\n\n{rule.summary}\n\n{rule.doc}\n"


def full_description(rule: Rule) -> str:
    s = sections(rule)
    return f"{s['What it does']}\n\n{s['Why it matters']}"


def anchor(rule: Rule) -> str:
    """The heading's anchor as GitHub renders `### PG001 volatile-before-static`."""
    return f"{rule.id}-{rule.name}".lower()


def help_uri(rule: Rule) -> str:
    return f"{DOCS_URL}#{anchor(rule)}"


def rules_markdown() -> str:
    """The rules table and one section per rule, for docs/lint-rules.md."""
    rules = sorted(RULES.values(), key=lambda r: r.id)
    out = ["| id | name | severity | what it catches |", "|---|---|---|---|"]
    out += [f"| [{r.id}](#{anchor(r)}) | {r.name} | {r.severity} | {r.summary} |" for r in rules]
    for r in rules:
        body = re.sub(r"^## ", "#### ", r.doc, flags=re.M)
        out += ["", f"### {r.id} {r.name}", "", f"Default severity: {r.severity}. {r.summary}", "", body]
    return "\n".join(out)


def update_docs(page: Path) -> bool:
    """Rewrite the generated part of `page` (between the START and END markers); True if it changed."""
    text = page.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise ValueError(f"{page}: no generated rules section (add the lines {START} and {END})")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n\n{rules_markdown()}\n\n{END}{tail}"
    if new != text:
        page.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{name}: {'updated' if update_docs(Path(name)) else 'up to date'}")
