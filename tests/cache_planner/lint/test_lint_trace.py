"""Traces: findings collapse per route, and each rule's money lost is estimated with the simulator."""

from __future__ import annotations

import json
from decimal import Decimal

from prefixgate.providers.trace import read_trace
from prefixgate.simulation.replay import replay
from tests.cache_planner.lint.support_lint import FIXTURES, lint


def test_losses_per_rule_come_from_the_simulator(tmp_path):
    trace = tmp_path / "support.jsonl"
    body = json.loads((FIXTURES / "pg005/fail.json").read_text())
    lines = []
    for i in range(8):
        b = json.loads(json.dumps(body))
        b["system"][0]["text"] = b["system"][0]["text"].replace("7c9e6679", f"{i:08x}")
        lines.append({"t": i * 20, "provider": "anthropic", "model": "claude-sonnet-4-6", "route": "support",
                      "output_tokens": 40, "body": b})
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = lint(trace, cost=True)
    losses = report.losses[report.findings[0].location.path]
    assert losses["PG001"] > Decimal("0.01") and losses["PG005"] == losses["PG001"]
    # The loss is what the planner's fix saves in a replay: less than the whole bill, more than nothing.
    total = replay(read_trace(trace)).total.cost.total
    assert losses["PG001"] < total
    pg005 = next(f for f in report.findings if f.rule == "PG005")
    assert "(and 7 more records of route 'support')" in pg005.message and pg005.data["records"] == 8


def test_conversation_rewrite_loss_and_rejected_rules(tmp_path):
    report = lint(FIXTURES / "pg010/fail.jsonl", cost=True)
    (losses,) = report.losses.values()
    assert losses["PG010"] > 0
    turn = next(f for f in report.findings if f.rule == "PG010")
    assert "sent as the same turn" in turn.message and turn.location.line == 3
    rejected = tmp_path / "rejected.jsonl"
    body = json.loads((FIXTURES / "pg004/fail.json").read_text())
    rejected.write_text(json.dumps({"t": 0, "provider": "anthropic", "model": "claude-sonnet-4-6", "body": body}) + "\n")
    (losses,) = lint(rejected, cost=True).losses.values()
    assert losses["PG004"] is None


def test_healthy_trace_has_no_findings_and_no_losses():
    report = lint(FIXTURES / "pg010/pass.jsonl", FIXTURES / "pg008/pass.jsonl", cost=True)
    assert report.findings == [] and report.losses == {}
