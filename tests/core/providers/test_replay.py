"""`prefixgate replay`: trace parsing, per-route and total accounting, errors, strategies, the CLI."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from click.testing import CliRunner

from prefixgate.cli import main
from prefixgate.providers.pricing import cost_of
from prefixgate.providers.trace import TraceError, TraceRecord, parse_record, read_trace
from prefixgate.simulation.replay import planner, replay
from prefixgate.usage import Usage
from tests.core.providers.support_prompts import anthropic_body, text_of

DOC = text_of(3000)
# Gemini 3.5 Flash caches nothing under 4,096 tokens (https://ai.google.dev/gemini-api/docs/caching).
GEMINI_DOC = text_of(5000)


def sample_trace() -> list[dict]:
    lines = []
    for i in range(4):
        lines.append({"t": i * 60, "provider": "anthropic", "model": "claude-sonnet-4-6", "route": "support",
                      "tenant": "acme", "output_tokens": 100, "body": anthropic_body(system_tokens=3000)})
        lines.append({"t": i * 60 + 1, "provider": "openai", "model": "gpt-5.4", "route": "search", "output_tokens": 50,
                      "body": {"model": "gpt-5.4", "messages": [{"role": "system", "content": DOC},
                                                               {"role": "user", "content": f"q{i}"}]}})
    lines.append({"t": 2, "provider": "gemini", "model": "gemini-3.5-flash", "route": "docs",
                  "endpoint": "cachedContents.create", "name": "cachedContents/docs",
                  "body": {"contents": [{"role": "user", "parts": [{"text": GEMINI_DOC}]}], "ttl": "3600s"}})
    for i in range(3):
        lines.append({"t": 10 + i, "provider": "gemini", "model": "gemini-3.5-flash", "route": "docs", "output_tokens": 10,
                      "body": {"contents": [{"role": "user", "parts": [{"text": " hi"}]}],
                               "cachedContent": "cachedContents/docs"}})
    lines.append({"t": 20, "provider": "gemini", "model": "gemini-3.5-flash", "route": "docs",
                  "endpoint": "cachedContents.delete", "name": "cachedContents/docs", "body": {}})
    bad = anthropic_body(system_tokens=3000, ttl="5m")
    bad["messages"][0]["content"] = [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    lines.append({"t": 500, "provider": "anthropic", "model": "claude-sonnet-4-6", "route": "support", "body": bad})
    return lines


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in sample_trace()) + "\n")
    return path


def test_replay_totals_per_route_and_overall(trace_file):
    report = replay(read_trace(trace_file))
    support, search, docs = report.routes["support"], report.routes["search"], report.routes["docs"]
    assert (support.requests, support.errors) == (4, 1)
    q = support.usage.uncached_input // 4
    # Anthropic: one 5m write, then three reads within the TTL.
    assert support.usage == Usage(uncached_input=4 * q, cache_read=3 * 3000, cache_writes={"5m": 3000}, output=400)
    assert search.usage.cache_read == 3 * 2944   # gpt-5.4: 3 reads of 1024 + 15 * 128
    # Gemini: the cache creation plus three reads of it; storage for 18 s of 5000 tokens at $1/MTok-h.
    assert docs.usage.cache_write == 5000 and docs.usage.cache_read == 3 * 5000
    assert docs.cost.storage == Decimal(5000) * Decimal(18) / Decimal(3600) / Decimal(10**6)
    total = report.total
    assert total.requests == 12 and total.errors == 1
    assert total.cost.total == support.cost.total + search.cost.total + docs.cost.total
    assert total.cost.savings == total.cost.without_cache - total.cost.total
    assert report.errors and report.errors[0].startswith("line 14: 400")


def test_replayed_costs_equal_pricing_each_usage(trace_file):
    records = [r for r in read_trace(trace_file) if r.route == "support"][:2]
    report = replay(records)
    expected = (cost_of("anthropic", "claude-sonnet-4-6", Usage(5, 0, {"5m": 3000}, 100))
                + cost_of("anthropic", "claude-sonnet-4-6", Usage(5, 3000, {}, 100)))
    assert report.routes["support"].cost == expected


def test_a_strategy_rewrites_bodies_before_the_simulator_sees_them(trace_file):
    def strip_markers(record, state):
        body = json.loads(json.dumps(record.body))
        for block in body.get("system", []) if isinstance(body.get("system"), list) else []:
            block.pop("cache_control", None)
        return body

    records = [r for r in read_trace(trace_file) if r.route == "support" and r.t < 500]
    report = replay(records, strip_markers, strategy_name="strip")
    support = report.routes["support"]
    assert support.usage.cache_read == 0 and support.cost.savings == 0


def volatile_trace() -> list[TraceRecord]:
    """A timestamp at the top of an unmarked system prompt: nothing caches unless the planner rewrites it."""
    return [parse_record(json.dumps({
        "t": i * 45, "provider": "anthropic", "model": "claude-sonnet-4-6", "route": "support", "output_tokens": 50,
        "body": {"model": "claude-sonnet-4-6", "max_tokens": 100,
                 "system": f"Current time: 2026-11-22T10:{i:02d}:00Z. You are Acme's support agent.{DOC}",
                 "messages": [{"role": "user", "content": f"Ticket {1000 + i}: my order is late"}]}}), i + 1)
        for i in range(8)]


def test_planner_strategy_turns_a_volatile_prefix_into_cache_hits():
    records = volatile_trace()
    plain = replay(records)
    planned = replay(records, planner(), strategy_name="planner")
    assert plain.total.usage.cache_read == 0 and plain.total.cost.savings == 0
    assert planned.total.errors == 0 and planned.total.usage.cache_read > 5 * 3000
    assert planned.total.cost.total < plain.total.cost.total


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "not valid JSON"),
    ('{"t": 1, "provider": "anthropic", "model": "m"}', "missing field 'body'"),
    ('{"t": "soon", "provider": "anthropic", "model": "m", "body": {}}', "'t' must be a number"),
    ('{"t": 1, "provider": "cohere", "model": "m", "body": {}}', "'provider' must be one of"),
    ('{"t": 1, "provider": "openai", "model": "m", "body": {}, "extra": 1}', "unknown field 'extra'"),
    ('{"t": 1, "provider": "openai", "model": "m", "body": {}, "output_tokens": -2}', "'output_tokens' must be"),
    ('{"t": 1, "provider": "openai", "model": "m", "body": {}, "endpoint": "cachedContents.create"}',
     "exists only for provider 'gemini'"),
    ('{"t": 1, "provider": "gemini", "model": "m", "body": {}, "endpoint": "cachedContents.delete"}', "needs 'name'"),
])
def test_bad_trace_lines_name_the_line(line, message):
    with pytest.raises(TraceError, match=message) as e:
        parse_record(line, 7, "t.jsonl")
    assert str(e.value).startswith("t.jsonl:7:")


def test_cli_prints_a_table_and_json(trace_file):
    runner = CliRunner()
    table = runner.invoke(main, ["replay", str(trace_file)])
    assert table.exit_code == 0, table.output
    assert "TOTAL" in table.output and "support" in table.output and "line 14: 400" in table.output
    as_json = runner.invoke(main, ["replay", str(trace_file), "--json"])
    data = json.loads(as_json.output)
    assert data["total"]["requests"] == 12
    # The CLI prints the simulator's own figures (to the micro-dollar), per route and in total.
    report = replay(read_trace(trace_file))
    micro = Decimal("0.000001")
    for name, route in [("total", report.total), *((r, report.routes[r]) for r in ("support", "search", "docs"))]:
        printed = data["total"] if name == "total" else data["routes"][name]
        assert Decimal(printed["cost"]) == route.cost.total.quantize(micro), name
        assert Decimal(printed["cost_without_cache"]) == route.cost.without_cache.quantize(micro), name
    assert set(data["routes"]) == {"support", "search", "docs"}
    assert Decimal(data["total"]["savings"]) > 0


def test_cli_errors_are_clear(tmp_path, trace_file):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"t": 0, "provider": "openai", "model": "gpt-5.4", "body": {}}\n\n[1]\n')
    result = CliRunner().invoke(main, ["replay", str(bad)])
    assert result.exit_code == 1 and f"{bad}:3: expected a JSON object per line" in result.output
    planned = CliRunner().invoke(main, ["replay", str(trace_file), "--strategy", "planner", "--json"])
    assert planned.exit_code == 0 and json.loads(planned.output)["strategy"] == "planner"


@pytest.mark.parametrize("command", ["replay", "plan"])
def test_a_trace_line_that_is_not_utf8_is_named(tmp_path, command):
    # A log re-saved as Latin-1 used to end replay and plan in a UnicodeDecodeError traceback.
    bad = tmp_path / "latin1.jsonl"
    good = '{"t": 0, "provider": "openai", "model": "gpt-5.4", "body": {"messages": []}}\n'
    bad.write_bytes(good.encode() + b'{"t": 1, "provider": "openai", "model": "gpt-5.4", "body": {"x": "caf\xe9"}}\n')
    result = CliRunner().invoke(main, [command, str(bad)])
    assert result.exit_code == 1 and result.exception is not None and isinstance(result.exception, SystemExit)
    assert f"{bad}:2: not UTF-8 text (byte 0xe9 at column 70)" in result.output


@pytest.mark.parametrize("command", ["replay", "plan"])
def test_an_empty_trace_says_so(tmp_path, command):
    # It printed nothing (plan) or a table of zeros (replay) and exited 0, as if there were nothing to save.
    empty = tmp_path / "exported.jsonl"
    empty.write_text("\n\n")
    result = CliRunner().invoke(main, [command, str(empty)])
    assert result.exit_code == 1 and f"{empty} holds no requests" in result.output
