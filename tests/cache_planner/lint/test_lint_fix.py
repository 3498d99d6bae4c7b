"""`--fix`: request files are rewritten by the planner and then replay cheaper through the provider
simulator; templates are never written, only given a suggested diff."""

from __future__ import annotations

import json
import shutil
from decimal import Decimal

import pytest
from click.testing import CliRunner

from prefixgate.cli import main
from prefixgate.providers.trace import TraceRecord
from prefixgate.simulation.replay import replay
from tests.cache_planner.lint.support_lint import FIXTURES, lint, rules_of

POLICY = json.loads((FIXTURES / "pg012/fail.json").read_text())["system"]


def renders(provider: str, i: int) -> dict:
    """The i-th request of one app: a per-request value at the top of a long static system prompt."""
    stamp = f"Current time: 2026-11-20T10:{i:02d}:00Z\n"
    question = f"Question {i}: where is my order?"
    if provider == "anthropic":
        return {"model": "claude-sonnet-4-6", "max_tokens": 256,
                "system": [{"type": "text", "text": stamp + POLICY, "cache_control": {"type": "ephemeral"}}],
                "messages": [{"role": "user", "content": question}]}
    if provider == "openai":
        return {"model": "gpt-5.4", "messages": [{"role": "system", "content": stamp + POLICY},
                                                 {"role": "user", "content": question}]}
    # Gemini 3.x Flash caches nothing under 4,096 tokens (G1): a longer policy (~4,800 tokens).
    return {"systemInstruction": {"parts": [{"text": stamp + POLICY * 4}]},
            "contents": [{"role": "user", "parts": [{"text": question}]}]}


MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-5.4", "gemini": "gemini-3.5-flash"}


def cost_of(provider: str, bodies: list[dict]) -> tuple:
    records = [TraceRecord(i + 1, i * 30.0, provider, MODELS[provider], b, output_tokens=50) for i, b in enumerate(bodies)]
    report = replay(records)
    return report.total.cost.total, report.total.errors


@pytest.mark.parametrize("provider", ["anthropic", "openai", "gemini"])
def test_fixed_requests_replay_cheaper(tmp_path, provider):
    originals = [renders(provider, i) for i in range(8)]
    for i, body in enumerate(originals):
        (tmp_path / f"req{i}.json").write_text(json.dumps(body, indent=2) + "\n")
    before = lint(tmp_path)
    assert "PG001" in rules_of(before)
    result = CliRunner().invoke(main, ["lint", "--fix", "--no-cost", str(tmp_path)])
    assert "fixed: " in result.output and "rewrite: moved 1 dynamic unit(s) (timestamp)" in result.output
    fixed = [json.loads((tmp_path / f"req{i}.json").read_text()) for i in range(8)]
    assert (tmp_path / "req0.json").read_text().startswith('{\n  "')  # indentation kept
    assert "PG001" not in rules_of(lint(tmp_path))
    old_cost, old_errors = cost_of(provider, originals)
    new_cost, new_errors = cost_of(provider, fixed)
    assert old_errors == new_errors == 0
    assert new_cost < old_cost * Decimal("0.75"), (provider, old_cost, new_cost)


def test_fix_adds_checkpoints_where_anthropic_had_none(tmp_path):
    bodies = []
    for i in range(6):
        body = json.loads((FIXTURES / "pg012/fail.json").read_text())
        body["messages"][0]["content"] = f"question {i}"
        bodies.append(body)
        (tmp_path / f"r{i}.json").write_text(json.dumps(body))
    CliRunner().invoke(main, ["lint", "--fix", "--no-cost", str(tmp_path)])
    fixed = [json.loads((tmp_path / f"r{i}.json").read_text()) for i in range(6)]
    assert "\n" not in (tmp_path / "r0.json").read_text()  # a one-line file stays one line
    assert fixed[0]["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert cost_of("anthropic", fixed)[0] < cost_of("anthropic", bodies)[0]


def test_invalid_request_files_are_left_alone(tmp_path):
    shutil.copy(FIXTURES / "pg000/fail.json", tmp_path / "bad.json")
    before = (tmp_path / "bad.json").read_text()
    result = CliRunner().invoke(main, ["lint", "--fix", str(tmp_path / "bad.json")])
    assert result.exit_code == 1 and (tmp_path / "bad.json").read_text() == before


def test_templates_get_a_suggested_diff_and_are_not_written(tmp_path):
    for name in ("fail.prompt.md", "fail.j2"):
        shutil.copy(FIXTURES / "pg001" / name, tmp_path / name)
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    result = CliRunner().invoke(main, ["lint", "--fix", str(tmp_path / "fail.prompt.md"), str(tmp_path / "fail.j2")])
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before
    out = result.output
    assert "suggested (templates are not rewritten)" in out
    assert "-Today is {{ today }} and you are talking to {customer_name}.\n" in out
    assert "+Today is {{ today }} and you are talking to {customer_name}." in out
    # A Jinja branch stays where it is (moving one end of it would break the template); the variable line moves.
    assert "-{% if vip %}" not in out and "-Customer: {{ customer.name }}" in out and "+Customer: {{ customer.name }}" in out
