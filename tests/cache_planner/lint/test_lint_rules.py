"""Every rule has a failing and a passing fixture; the finding points at the offending source text."""

from __future__ import annotations

import pytest

from prefixgate.cache_planner.lint.config import LintConfig
from prefixgate.cache_planner.lint.rules import RULES
from tests.cache_planner.lint.support_lint import FIXTURES, lint, rules_of

CASES = [
    ("PG000", "pg000/fail.json", "pg000/pass.json"),
    ("PG001", "pg001/fail.json", "pg001/pass.json"),
    ("PG001", "pg001/openai_fail.json", "pg001/pass.json"),
    ("PG001", "pg001/gemini_fail.json", "pg001/pass.json"),
    ("PG001", "pg001/fail.prompt.md", "pg001/pass.prompt.md"),
    ("PG001", "pg001/fail.j2", "pg001/pass.j2"),
    ("PG001", "pg001/fail.py", "pg001/pass.py"),
    ("PG002", "pg002/fail.json", "pg002/pass.json"),
    ("PG002", "pg002/fail.prompt.txt", "pg001/pass.prompt.md"),
    ("PG003", "pg003/fail.json", "pg003/pass.json"),
    ("PG004", "pg004/fail.json", "pg004/pass.json"),
    ("PG005", "pg005/fail.json", "pg005/pass.json"),
    ("PG006", "pg006/fail.json", "pg006/pass.json"),
    ("PG007", "pg007/fail.json", "pg007/pass.json"),
    ("PG007", "pg007/fail.jsonl", "pg007/pass.jsonl"),
    ("PG008", "pg008/fail.jsonl", "pg008/pass.jsonl"),
    ("PG009", "pg009/fail.json", "pg009/pass.json"),
    ("PG010", "pg010/fail.jsonl", "pg010/pass.jsonl"),
    ("PG011", "pg011/fail.json", "pg011/pass.json"),
    ("PG012", "pg012/fail.json", "pg012/pass.json"),
]


def test_every_rule_has_cases_and_documentation():
    assert {rule for rule, _, _ in CASES} == set(RULES)
    for r in RULES.values():
        assert r.severity in ("error", "warning", "info") and r.summary.endswith(".") and r.hint


@pytest.mark.parametrize(("rule", "failing", "passing"), CASES, ids=[f"{r}-{f}" for r, f, _ in CASES])
def test_rule_fails_and_passes(rule, failing, passing):
    only = LintConfig(enable=frozenset({rule}))
    bad = lint(FIXTURES / failing, config=only)
    assert rules_of(bad) == {rule}, bad.findings
    assert lint(FIXTURES / passing, config=only).findings == []


def test_findings_point_at_the_value_in_the_source():
    finding = next(f for f in lint(FIXTURES / "pg001/fail.json").findings if f.rule == "PG001")
    source_line = (FIXTURES / "pg001/fail.json").read_text().splitlines()[finding.location.line - 1]
    assert source_line[finding.location.col - 1:].startswith("2026-11-20T10:15:00Z")
    assert finding.location.excerpt == source_line
    assert "timestamp" in finding.message and "1," in finding.message  # how many static tokens it costs


def test_template_positions_in_python_and_jinja():
    py = lint(FIXTURES / "pg001/fail.py").findings[0]
    line = (FIXTURES / "pg001/fail.py").read_text().splitlines()[py.location.line - 1]
    assert line[py.location.col - 1:].startswith("{user}")
    # One finding per cause: the customer's name (its name says it changes); the earlier `{% if vip %}`,
    # with nothing showing it changes, is a related location of that finding, not a finding of its own.
    (j2,) = lint(FIXTURES / "pg001/fail.j2").findings
    assert (j2.location.line, j2.location.col) == (2, 11)
    assert [(loc.line, loc.col) for loc in j2.related] == [(1, 1)]


@pytest.mark.parametrize(("name", "rule"), [("pg003/fail.json", "PG003"), ("pg005/fail.json", "PG005"),
                                            ("pg006/fail.json", "PG006")])
def test_checkpoint_rules_point_at_the_marker(name, rule):
    findings = [f for f in lint(FIXTURES / name).findings if f.rule == rule]
    assert findings, name
    for f in findings:
        assert '"cache_control"' in f.location.excerpt, (name, f)


def test_minimum_follows_the_model_and_the_config():
    # claude-opus-4-6 needs 4096 tokens: the same ~1,200-token prompt is then "near" nothing (below half).
    assert "PG002" not in rules_of(lint(FIXTURES / "pg002/fail.json", config=LintConfig(min_cache_tokens=4096)))
    assert "PG002" in rules_of(lint(FIXTURES / "pg002/pass.json", config=LintConfig(min_cache_tokens={"claude-sonnet-4-6": 2048})))
    # Templates use the configured target model: the ~330-token template is near Sonnet 5.5's 512 minimum (the
    # default), and below half of Opus 4.6's 4,096.
    assert "PG002" not in rules_of(lint(FIXTURES / "pg002/fail.prompt.txt", config=LintConfig(provider="anthropic", model="claude-opus-4-6")))


def test_severity_override_and_disable():
    cfg = LintConfig(severity={"PG012": "error"}, disable=frozenset({"PG001"}))
    report = lint(FIXTURES / "pg001/fail.json", config=cfg)
    assert {(f.rule, f.severity) for f in report.findings} == {("PG012", "error")}
