"""`prefixgate lint` on OpenAI Responses bodies: request files and traces are read by shape, findings point
at `instructions`, and `--fix` rewrites a request file static-first."""

from __future__ import annotations

import json

from click.testing import CliRunner

from prefixgate.cli import main
from tests.cache_planner.lint.support_lint import lint, rules_of

POLICY = "You are the support agent for Acme. Answer in two sentences or fewer.\n" * 90


def _body(i: int) -> dict:
    return {"model": "gpt-5.4", "instructions": f"Current time: 2026-11-20T10:{i:02d}:00Z\n{POLICY}",
            "input": [{"role": "user", "content": f"Question {i}: where is my order?"}]}


def test_a_responses_trace_is_linted_and_the_finding_points_at_instructions(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(json.dumps({"t": i * 30, "provider": "openai", "model": "gpt-5.4", "body": _body(i)})
                              for i in range(4)) + "\n")
    report = lint(path)
    assert "PG001" in rules_of(report) and "PG000" not in rules_of(report)
    finding = next(f for f in report.findings if f.rule == "PG001")
    assert "2026-11-20T10:00:00Z" in finding.message and "static prompt" in finding.message


def test_fix_moves_the_time_out_of_instructions(tmp_path):
    path = tmp_path / "request.json"
    path.write_text(json.dumps(_body(1)))
    result = CliRunner().invoke(main, ["lint", "--fix", str(path)])
    assert result.exit_code == 0, result.output
    fixed = json.loads(path.read_text())
    assert fixed["instructions"] == POLICY and fixed["prompt_cache_key"].startswith("pg-")
    assert fixed["input"][0]["content"][0]["text"].startswith("Context:\nCurrent time: 2026-11-20T10:01:00Z")
