"""Keep-alive refreshes: the cheapest refresh body per provider (`cache_planner.keepalive`), checked against the
provider simulator the mock providers serve (it rejects what the providers document as invalid), and
`prefixgate plan --keepalive` (refreshes as extra trace records, priced by replay)."""

from __future__ import annotations

import json
from decimal import Decimal

from click.testing import CliRunner

from prefixgate.cache_planner.keepalive import (
    refresh_body,
    refresh_cost,
    static_mark,
    through,
)
from prefixgate.cache_planner.rewrite import conversation_start
from prefixgate.cache_planner.trace import plan_trace
from prefixgate.cli import main
from prefixgate.cost import Price
from prefixgate.dialects import request_dialect
from prefixgate.providers.trace import TraceRecord, parse_record
from prefixgate.simulation.replay import passthrough, replay
from prefixgate.simulation.simulator import Simulator

MODEL = "claude-sonnet-5-5"
SYSTEM = "You are a careful coding agent. " + " ".join(f"Rule {i}: keep every change small and tested." for i in range(150))
EPHEMERAL = {"type": "ephemeral"}


def claude_body(**extra) -> dict:
    return {"model": MODEL, "max_tokens": 1024, "stream": True,
            "system": [{"type": "text", "text": SYSTEM, "cache_control": EPHEMERAL}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Fix the parser. " * 40,
                                                       "cache_control": EPHEMERAL}]},
                         {"role": "assistant", "content": "Looking at it."},
                         {"role": "user", "content": "Go on."}], **extra}


def test_anthropic_refresh_is_the_prefix_through_the_last_checkpoint_with_no_output():
    body = claude_body()
    refresh = refresh_body("anthropic", body)
    assert refresh is not None and refresh.kind == "generate" and refresh.prewarm
    # max_tokens 0 pre-warms (A2); streaming is refused with it and does not touch the cache, so it goes.
    assert refresh.body["max_tokens"] == 0 and "stream" not in refresh.body
    assert refresh.body["messages"] == body["messages"][:1] and refresh.body["system"] == body["system"]
    sim = Simulator(entry_visible_after_s=0)
    written = sim.respond("anthropic", body, now=0).usage
    prefix = sum(written.cache_writes.values())
    kept = sim.respond("anthropic", refresh.body, now=290).usage
    assert (kept.cache_read, kept.cache_writes, kept.uncached_input) == (prefix, {}, 0)
    # The 5-minute entry refreshed at 290 s is still there at 580 s: the next request reads it.
    assert sim.respond("anthropic", body, now=580).usage.cache_read == prefix


def test_a_refresh_of_the_system_prompt_alone_sends_a_one_character_turn():
    body = {**claude_body(), "messages": [{"role": "user", "content": "Fix the parser."}]}
    refresh = refresh_body("anthropic", body)
    assert refresh.body["messages"] == [{"role": "user", "content": "."}]
    Simulator().respond("anthropic", refresh.body, now=0)


def test_the_static_prefix_is_kept_by_a_refresh_cut_at_its_own_mark():
    """The system prompt's checkpoint is the static prefix's (before the first turn); the body cut there keeps the
    system prompt's mark and takes the conversation's off, so its refresh is the system prompt and a filler turn."""
    body = claude_body()
    conv = request_dialect("anthropic", body).parse_request(body, model=MODEL)
    assert conversation_start(conv) == 1 and static_mark(conv) == (0, conv.blocks()[0].checkpoint)   # the system prompt
    cut = through("anthropic", body, 0, model=MODEL)
    assert cut["system"] == body["system"] and all("cache_control" not in block for m in cut["messages"]
                                                   for block in m["content"] if isinstance(block, dict))
    assert body["messages"][0]["content"][0]["cache_control"] == EPHEMERAL        # the caller's body untouched
    refresh = refresh_body("anthropic", cut)
    assert refresh is not None and refresh.body["messages"] == [{"role": "user", "content": "."}]
    unmarked = {**body, "system": SYSTEM}
    assert static_mark(request_dialect("anthropic", unmarked).parse_request(unmarked, model=MODEL)) is None


def test_what_salts_the_cache_stays_and_asks_for_the_least_output_instead_of_a_prewarm():
    # Thinking and a forced tool choice are refused with max_tokens 0 (A2) but change what is cached.
    thinking = refresh_body("anthropic", claude_body(thinking={"type": "enabled", "budget_tokens": 1024}))
    assert thinking.body["max_tokens"] == 1025 and thinking.body["thinking"]["budget_tokens"] == 1024
    forced = refresh_body("anthropic", claude_body(tools=[{"name": "grep", "input_schema": {"type": "object"}}],
                                                   tool_choice={"type": "any"}))
    assert forced.body["max_tokens"] == 1 and not forced.prewarm
    sim = Simulator()
    for refresh in (thinking, forced):
        sim.respond("anthropic", refresh.body, now=0)


def test_where_a_pre_warm_is_refused_the_refresh_asks_for_the_least_output():
    """`prewarm=False` (the gateway's fallback once an upstream refused a pre-warm): one token on Messages, the
    Responses minimum of 16 without `prompt_cache_options.prewarm`; the same prefix is read."""
    claude = refresh_body("anthropic", claude_body(), prewarm=False)
    assert claude.body["max_tokens"] == 1 and claude.output_tokens == 1 and not claude.prewarm
    assert claude.body["messages"] == refresh_body("anthropic", claude_body()).body["messages"]
    new = refresh_body("openai", {"model": "gpt-6.2-sol", "input": SYSTEM, "prompt_cache_options": {"ttl": "12h"}},
                       prewarm=False)
    assert new.body["prompt_cache_options"] == {"ttl": "12h"} and new.body["max_output_tokens"] == 16 and not new.prewarm
    sim = Simulator()
    sim.respond("anthropic", claude.body, now=0)
    sim.respond("openai", new.body, now=0)


def test_a_gpt_6_agent_loop_in_implicit_mode_is_refreshed_through_its_newest_tool_output():
    """The planner's implicit mode ends an agent loop's entry at OpenAI's own breakpoint, the newest tool output
    (a string no explicit breakpoint can mark): the refresh keeps the whole input, and reads all of it."""
    body = {"model": "gpt-6.2-sol", "store": False, "prompt_cache_options": {"mode": "implicit", "ttl": "30m"},
            "input": [{"role": "developer", "content": [{"type": "input_text", "text": SYSTEM,
                                                         "prompt_cache_breakpoint": {"mode": "explicit"}}]},
                      {"role": "user", "content": "Fix the parser."},
                      {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{}"},
                      {"type": "function_call_output", "call_id": "c1", "output": "def parse(): ... " * 300}]}
    refresh = refresh_body("openai", body)
    assert refresh.prewarm and refresh.body["input"] == body["input"]
    sim = Simulator()
    written = sum(sim.respond("openai", body, now=0).usage.cache_writes.values())
    kept = sim.respond("openai", refresh.body, now=25 * 60).usage
    assert kept.cache_read == written and kept.cache_writes == {}


def test_nothing_cached_nothing_to_refresh():
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    assert refresh_body("anthropic", body) is None


def test_openai_refreshes():
    chat = {"model": "gpt-5.4", "stream": True, "max_tokens": 500,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]}
    refresh = refresh_body("openai", chat)
    assert refresh.body["max_completion_tokens"] == 1 and "max_tokens" not in refresh.body and "stream" not in refresh.body
    # GPT-5.6+ Responses: prompt_cache_options.prewarm fills the cache with no output (wire-2026-11.md section 3).
    new = refresh_body("openai", {"model": "gpt-6.2-sol", "input": SYSTEM, "prompt_cache_options": {"ttl": "12h"}})
    assert new.prewarm and new.body["prompt_cache_options"] == {"ttl": "12h", "prewarm": True}
    old = refresh_body("openai", {"model": "gpt-5.4", "input": SYSTEM})
    assert old.body["max_output_tokens"] == 16 and not old.prewarm   # the smallest Responses accepts
    sim = Simulator()
    for r in (refresh, new, old):
        sim.respond("openai", r.body, now=0)


def test_a_gemini_explicit_cache_is_refreshed_by_extending_its_ttl():
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "cachedContent": "cachedContents/abc"}
    refresh = refresh_body("gemini", body, ttl_s=1800)
    assert (refresh.kind, refresh.name, refresh.body) == ("cachedContents.update", "cachedContents/abc", {"ttl": "1800s"})


def test_refresh_costs_from_published_prices():
    # Claude Sonnet 4.x list prices: $3 input, $0.30 cache read per MTok; Gemini 3.5 Flash $1.50 input, $0.15 cached,
    # $9 output, storage $1/MTok/hour (ai.google.dev pricing; providers.toml's storage source).
    sonnet = Price(input=Decimal("3"), output=Decimal("15"), cache_read=Decimal("0.30"))
    prewarm = refresh_body("anthropic", claude_body())
    assert refresh_cost(prewarm, sonnet, 10_000) == Decimal("0.003")
    flash = Price(input=Decimal("1.50"), output=Decimal("9"), cache_read=Decimal("0.15"), storage_per_hour=Decimal("1"))
    extend = refresh_body("gemini", {"contents": [], "cachedContent": "cachedContents/abc"})
    assert refresh_cost(extend, flash, 100_000, ttl_s=3600) == Decimal("0.1")


def record(t: float, body: dict, keepalive: bool = False) -> TraceRecord:
    return TraceRecord(line=0, t=t, provider="anthropic", model=MODEL, body=body, route="agent", tenant="acme",
                       output_tokens=0 if keepalive else 100, keepalive=keepalive)


def test_replay_prices_a_refresh_and_counts_nothing_for_it_without_caching():
    body = claude_body()
    alone = replay([record(0, body)], passthrough).total
    both = replay([record(0, body), record(290, refresh_body("anthropic", body).body, keepalive=True)], passthrough).total
    assert both.requests == 2 and both.keepalives == 1
    assert both.cost.without_cache == alone.cost.without_cache
    assert both.cost.total > alone.cost.total


def agent_session(breaks: int = 8, steps: int = 5, pause: float = 5400.0) -> list[TraceRecord]:
    """One agent conversation: bursts of tool steps 10 s apart, each burst followed by a 90-minute break."""
    messages: list = []
    out, t = [], 0.0
    for b in range(breaks):
        messages.append({"role": "user", "content": f"Task {b}: " + "refactor the module " * 30})
        for s in range(steps):
            out.append(record(t, {"model": MODEL, "max_tokens": 512, "system": SYSTEM, "messages": list(messages)}))
            messages.append({"role": "assistant", "content": f"Step {b}.{s} done."})
            messages.append({"role": "user", "content": "Result: " + "all tests pass " * 40})
            t += 10.0
        t += pause
    return out


def test_plan_keepalive_keeps_every_request_and_adds_refreshes_that_pay():
    records = agent_session()
    lines = list(plan_trace(records, keepalive=True))
    originals = [line for line in lines if not line.get("keepalive")]
    refreshes = [line for line in lines if line.get("keepalive")]
    assert [line["t"] for line in originals] == [r.t for r in records]
    assert [texts(line["body"]) for line in originals] == [texts(r.body) for r in records]
    assert refreshes, "the session comes back after every break: once that is learned, refreshes pay"
    assert [line["t"] for line in lines] == sorted(line["t"] for line in lines)
    assert all(r["output_tokens"] == 0 and r["body"]["max_tokens"] == 0 for r in refreshes)
    kept = replay([parse_record(json.dumps(line)) for line in lines], passthrough)
    assert not kept.errors and kept.total.keepalives == len(refreshes)
    without = replay([parse_record(json.dumps(line)) for line in plan_trace(records)], passthrough)
    assert kept.total.cost.total < without.total.cost.total


def texts(body: dict) -> list[str]:
    """What a request says, whatever cache markers and block forms the plan gave it."""
    def flat(content) -> list[str]:
        return [content] if isinstance(content, str) else [part["text"] for part in content]
    return flat(body["system"]) + [t for m in body["messages"] for t in flat(m["content"])]


def test_no_refresh_where_nothing_repeats(tmp_path):
    records = [record(i * 400.0, {"model": MODEL, "max_tokens": 100, "system": f"Report {i}: summarise it.",
                                  "messages": [{"role": "user", "content": f"Report {i}. " + "figures " * 900}]})
               for i in range(12)]
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"t": r.t, "provider": r.provider, "model": r.model, "body": r.body}) + "\n"
                             for r in records))
    result = CliRunner().invoke(main, ["plan", "--keepalive", str(trace)])
    assert result.exit_code == 0, result.output
    out = [json.loads(line) for line in result.output.splitlines()]
    assert len(out) == len(records) and not any(line.get("keepalive") for line in out)
