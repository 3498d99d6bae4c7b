"""Rule documentation is written once, in each rule's docstring: --explain, the docs page and SARIF show it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from prefixgate.cache_planner.lint.explain import (
    END,
    SECTIONS,
    START,
    full_description,
    help_uri,
    rules_markdown,
    sections,
)
from prefixgate.cache_planner.lint.output import to_sarif
from prefixgate.cache_planner.lint.rules import RULES
from prefixgate.cli import main
from tests.cache_planner.lint.support_lint import FIXTURES, lint

DOCS = Path(__file__).resolve().parents[3] / "docs" / "lint-rules.md"


def test_every_rule_documents_the_four_sections() -> None:
    for rule in RULES.values():
        found = sections(rule)
        assert list(found) == list(SECTIONS), rule.id
        assert all(len(body) > 20 for body in found.values()), rule.id


def test_explain_prints_the_docstring_and_exits_0() -> None:
    result = CliRunner().invoke(main, ["lint", "--explain", "pg001"])
    assert result.exit_code == 0
    assert result.output.startswith("PG001 volatile-before-static (warning)")
    for title in SECTIONS:
        assert f"## {title}" in result.output


def test_explain_unknown_code_exits_2_with_the_list() -> None:
    result = CliRunner().invoke(main, ["lint", "--explain", "PG999"])
    assert result.exit_code == 2
    assert "unknown rule 'PG999'" in result.output
    assert ", ".join(sorted(RULES)) in result.output


def test_docs_page_holds_the_generated_rules_section() -> None:
    text = DOCS.read_text(encoding="utf-8")
    generated = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert generated == rules_markdown(), "run: python -m prefixgate.cache_planner.lint.explain docs/lint-rules.md"


def test_sarif_rules_carry_the_docstring_and_a_link() -> None:
    sarif = to_sarif(lint(FIXTURES / "pg001"))
    for entry in sarif["runs"][0]["tool"]["driver"]["rules"]:
        rule = RULES[entry["id"]]
        assert entry["fullDescription"]["text"] == full_description(rule)
        assert entry["helpUri"] == help_uri(rule) and help_uri(rule).endswith(f"#{rule.id.lower()}-{rule.name}")
