"""Text, JSON and SARIF renderings. The SARIF is validated against the official SARIF 2.1.0 schema
(OASIS errata01, `sarif-schema-2.1.0.json` beside this file), so GitHub code scanning accepts it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from prefixgate.cache_planner.lint.output import render, to_sarif
from tests.cache_planner.lint.support_lint import FIXTURES, lint

SCHEMA = json.loads((Path(__file__).parent / "sarif-schema-2.1.0.json").read_text())


def _validate(doc: dict) -> None:
    validator_cls = jsonschema.validators.validator_for(SCHEMA)
    validator_cls.check_schema(SCHEMA)
    validator_cls(SCHEMA, format_checker=validator_cls.FORMAT_CHECKER).validate(doc)


def test_sarif_is_valid_2_1_0_with_rules_and_locations():
    report = lint(FIXTURES / "pg001", FIXTURES / "pg004/fail.json", FIXTURES / "pg008/fail.jsonl", cost=True)
    doc = json.loads(render(report, "sarif"))
    _validate(doc)
    run = doc["runs"][0]
    assert doc["version"] == "2.1.0" and run["tool"]["driver"]["name"] == "prefixgate"
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rule_ids == sorted(rule_ids) and "PG001" in rule_ids
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels["PG004"] == "error" and levels["PG001"] == "warning"
    for result in run["results"]:
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        loc = result["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uriBaseId"] == "%SRCROOT%" and loc["region"]["startLine"] >= 1
    assert "estimatedLossUsd" in run["properties"]


def test_sarif_of_a_clean_run_is_valid_and_empty():
    doc = to_sarif(lint(FIXTURES / "pg000/pass.json"))
    _validate(doc)
    assert doc["runs"][0]["results"] == []


def test_invalid_sarif_is_rejected_by_the_schema():
    doc = to_sarif(lint(FIXTURES / "pg004/fail.json"))
    doc["runs"][0]["results"][0]["level"] = "fatal"
    try:
        _validate(doc)
    except jsonschema.ValidationError as e:
        assert "fatal" in e.message
    else:
        raise AssertionError("the schema accepted an unknown level")


def test_json_output_lists_findings_and_summary():
    doc = json.loads(render(lint(FIXTURES / "pg006/fail.json"), "json"))
    assert doc["summary"] == {"error": 1, "warning": 0, "info": 0}
    (finding,) = doc["findings"]
    assert finding["rule"] == "PG006" and finding["name"] == "ttl-order" and finding["path"].endswith("pg006/fail.json")
    assert finding["line"] > 1 and finding["col"] > 1 and finding["hint"]


def test_text_output_has_location_excerpt_caret_and_colour_only_when_asked():
    report = lint(FIXTURES / "pg001/fail.prompt.md")
    plain = render(report, "text")
    lines = plain.splitlines()
    # Today's date changes once a day (no more than an expiring entry): the customer is the first cause.
    assert "fixtures/pg001/fail.prompt.md:3:45: PG001 warning: template variable '{customer_name}'" in lines[0]
    assert lines[1] == "    Today is {{ today }} and you are talking to {customer_name}."
    assert lines[2] == "    " + " " * 44 + "^"
    assert lines[-1].startswith("Found 1 problem (0 errors, 1 warning, 0 info) in 1 file.")
    assert "\x1b[" not in plain and "\x1b[" in render(report, "text", colour=True)


def test_long_lines_are_cut_around_the_column():
    finding = next(f for f in lint(FIXTURES / "pg008/fail.jsonl").findings)
    text = render(lint(FIXTURES / "pg008/fail.jsonl"), "text").splitlines()
    excerpt, caret = text[1], text[2]
    assert len(excerpt) < 120 and len(finding.location.excerpt) > 1000
    assert excerpt[caret.index("^")] == '"'  # the caret sits on the system prompt's opening quote


def test_sarif_related_locations_and_rule_docs_are_valid_2_1_0():
    corpus = Path(__file__).parent / "corpus"
    doc = to_sarif(lint(corpus / "py/02_user_id_and_time_first.py", corpus / "jinja"))
    _validate(doc)
    results = doc["runs"][0]["results"]
    assert any(r.get("relatedLocations") for r in results)
    assert all(r["helpUri"].startswith("https://") for r in doc["runs"][0]["tool"]["driver"]["rules"])
