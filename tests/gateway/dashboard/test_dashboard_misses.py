"""Miss diagnosis: prefix shapes of real parsed requests, the first differing segment, each reason the
misses view names, what a miss lost, and the per-route ranking."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.cache_planner.detectors import volatile_spans
from prefixgate.dialects import anthropic
from prefixgate.gateway.dashboard.misses import diagnose, missed_usd, misses_by_route
from prefixgate.gateway.dashboard.provider_reasons import speaks, why
from prefixgate.ledger import LedgerRecord
from prefixgate.prefix_shape import first_difference, parse_shape, prefix_shape

BODY = "Answer from the handbook and cite the section. " * 60
WEATHER = {"name": "weather", "description": "Weather for a city", "input_schema": {"type": "object"}}
CLOCK = {"name": "clock", "description": "Time in a zone", "input_schema": {"type": "object"}}
CHECKPOINT = "checkpoint: static at 1500 tokens, ttl 5m (p(reuse<5m)=0.90)"


def conv(system: str, tools: list[dict] | None = None, turns: list[str] = ("hello",)):
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
    body = {"model": "claude-sonnet-4-6", "max_tokens": 8, "system": system, "messages": messages}
    if tools:
        body["tools"] = tools
    return anthropic.parse_request(body)


def record(c, i: int, ts: float, *, route: str = "r", explanation: list[str] | None = None, cache_read: int = 0,
           writes: dict[str, int] | None = None, uncached: int = 100) -> LedgerRecord:
    return LedgerRecord(id=f"q{i}", ts=ts, route=route, provider="anthropic", model="claude-sonnet-4-6",
                        uncached_input=uncached, cache_read=cache_read, cache_writes=writes or {},
                        explanation=explanation if explanation is not None else [CHECKPOINT],
                        segments=prefix_shape(c, "anthropic", volatile_spans))


def test_shape_round_trips_and_records_volatile_kinds_only_in_the_leading_prefix():
    c = conv("Today is 2026-03-01T10:00:00Z. " + BODY, [WEATHER], ["ticket 2026-03-01T10:00:00Z"])
    shape = parse_shape(prefix_shape(c, "anthropic", volatile_spans))
    assert [s.role for s in shape] == ["tools", "system", "user"]
    assert shape[1].kinds == ("timestamp",) and shape[2].kinds == ()
    assert shape[1].tokens > 500 and all(s.leading for s in shape[:2]) and not shape[2].leading
    assert parse_shape(["junk", "system:a:b:notanumber:"]) == []


def test_a_conversation_that_grew_by_a_turn_has_no_difference():
    before = parse_shape(prefix_shape(conv(BODY, turns=["hi"]), "anthropic", volatile_spans))
    after = parse_shape(prefix_shape(conv(BODY, turns=["hi", "hello!", "more"]), "anthropic", volatile_spans))
    assert first_difference(before, after) is None


def test_timestamp_in_the_system_prompt_is_a_volatile_span():
    a = record(conv("Now: 2026-03-01T10:00:00Z. " + BODY), 1, 1000.0)
    b = record(conv("Now: 2026-03-01T10:00:05Z. " + BODY), 2, 1005.0, writes={"5m": 1500})
    d = diagnose(b, a)
    assert d.reason == "volatile_span"
    assert "timestamp in the system prompt (segment 0" in d.detail
    assert d.segment.role == "system" and d.previous is a


def test_tools_in_a_new_order_and_changed_tools_are_told_apart():
    a = record(conv(BODY, [WEATHER, CLOCK]), 1, 1000.0)
    reordered = record(conv(BODY, [CLOCK, WEATHER]), 2, 1001.0)
    changed = record(conv(BODY, [WEATHER, {**CLOCK, "description": "Time anywhere"}]), 3, 1002.0)
    assert diagnose(reordered, a).reason == "tools_reordered"
    assert diagnose(changed, a).reason == "tools_changed"


def test_a_changed_prompt_without_volatile_text_is_a_prefix_change():
    a = record(conv(BODY), 1, 1000.0)
    b = record(conv("Be brief. " + BODY), 2, 1001.0)
    d = diagnose(b, a)
    assert d.reason == "prefix_changed" and "system prompt" in d.detail


def test_an_unchanged_prefix_after_a_gap_longer_than_its_ttl_expired():
    c = conv(BODY)
    a = record(c, 1, 1000.0)
    late = record(c, 2, 1000.0 + 420, writes={"5m": 1500})
    d = diagnose(late, a)
    assert d.reason == "ttl_expired" and d.detail == "7m 00s since the previous request, ttl 5m 00s"
    long_ttl = record(c, 3, 1000.0, explanation=[CHECKPOINT.replace("ttl 5m", "ttl 1h")])
    assert diagnose(late, long_ttl).reason != "ttl_expired"


def test_planner_lines_come_first():
    c = conv(BODY)
    a = record(c, 1, 1000.0)
    small = record(c, 2, 1001.0, explanation=["skip: static checkpoint: 300 tokens is below claude-sonnet-4-6's minimum of 1024"])
    assert diagnose(small, a).reason == "below_minimum"
    assert "300 tokens is below" in diagnose(small, a).detail
    off = record(c, 3, 1001.0, explanation=["passthrough: planning is off for this route"])
    assert diagnose(off, a).reason == "planner_off"
    first = record(c, 4, 1001.0)
    assert diagnose(first, None).reason == "cold"


def test_rewrite_mode_moves_the_timestamp_out_of_the_prefix():
    state = PlannerState()
    shapes = []
    for second in range(3):
        c = conv(f"You are the support agent.\nCurrent time: 2026-03-01T10:00:0{second}Z.\n" + BODY)
        planned = plan(c, Target("anthropic", "claude-sonnet-4-6"), state, "rewrite", route="support").conversation
        shapes.append(parse_shape(prefix_shape(planned, "anthropic", volatile_spans)))
    seg = first_difference(shapes[1], shapes[2])
    assert seg is not None and not seg.leading     # the system prompt is now the same every time
    assert shapes[2][0].kinds == ()


def test_missed_usd_reprices_writes_as_reads_plus_the_uncovered_leading_prefix():
    c = conv(BODY)
    leading = parse_shape(prefix_shape(c, "anthropic", volatile_spans))[0].tokens
    rec = record(c, 1, 1000.0, writes={"5m": leading - 100}, uncached=300)
    # claude-sonnet-4-6: input 3, 5m write 3.75, read 0.30 USD per million tokens.
    expected = (Decimal(leading - 100) * Decimal("3.45") + Decimal(100) * Decimal("2.70")) / 1_000_000
    assert missed_usd(rec) == expected
    assert missed_usd(LedgerRecord(id="x", ts=0, provider="anthropic", model="no-such-model", uncached_input=5)) == 0


def test_routes_rank_by_money_lost_and_earlier_records_only_serve_as_previous():
    rows = []
    for i in range(4):   # "noisy": a timestamp per request, every request writes 1500 tokens
        rows.append(record(conv(f"At 2026-03-01T10:00:0{i}Z. " + BODY), i, 1000.0 + i, route="noisy", writes={"5m": 1500}))
    steady = conv(BODY)
    rows.append(record(steady, 10, 990.0, route="steady", writes={"5m": 1500}))     # before `since`
    rows.append(record(steady, 11, 1001.5, route="steady", cache_read=1500))         # a hit
    rows.append(record(steady, 12, 1400.0, route="steady", writes={"5m": 1500}))     # 6m later: expired
    rows.sort(key=lambda r: r.ts)
    out = misses_by_route(rows, since=1000.0)
    assert [r["route"] for r in out] == ["noisy", "steady"]
    noisy, steady_row = out
    assert noisy["misses"] == 4 and noisy["requests"] == 4
    # The route's first request has no predecessor to diff against: a cold start.
    assert {e["reason"]: e["count"] for e in noisy["reasons"]} == {"volatile_span": 3, "cold": 1}
    assert noisy["top_reason"]["reason"] == "volatile_span"
    assert noisy["first_difference"]["segment"]["volatile_kinds"] == ["timestamp"]
    assert steady_row["requests"] == 2 and steady_row["misses"] == 1
    assert steady_row["top_reason"]["reason"] == "ttl_expired"
    assert Decimal(noisy["missed_usd"]) == sum(missed_usd(r) for r in rows if r.route == "noisy")


def test_rows_without_a_provider_reason_leave_the_inferred_why():
    """Rows an older version wrote (the columns NULL) and rows whose provider said nothing useful (pending,
    unavailable) never show as a provider reason; a real one wins the why."""
    old = LedgerRecord(id="a", ts=1.0, miss_reason="cold: this request wrote the prefix", provider_miss_reason=None)
    pending = LedgerRecord(id="b", ts=2.0, miss_reason="x", provider_miss_reason="pending")
    named = LedgerRecord(id="c", ts=3.0, miss_reason="x", provider_miss_reason="system_changed", provider_missed_tokens=900)
    assert not speaks(old) and not speaks(pending) and speaks(named)
    assert why(old)["source"] == "gateway" and why(old)["reason"] == "cold: this request wrote the prefix"
    assert why(named) == {"source": "provider", "reason": "system_changed", "label": "system prompt changed",
                          "missed_tokens": 900, "inferred": "x"}


def test_the_gateways_own_rows_are_not_a_routes_requests():
    steady = conv(BODY)
    rows = [record(steady, 1, 1000.0, writes={"5m": 1500}), record(steady, 2, 1001.0, cache_read=1500)]
    # Keep-alive refreshes and an attempt given up on at a timeout (its request has a record of its own).
    rows += [replace(record(steady, 20 + i, 1010.0 + i, cache_read=1500), kind="keepalive") for i in range(3)]
    rows.append(replace(record(steady, 30, 1020.0), kind="abandoned_attempt", status=504))
    (route,) = misses_by_route(rows, since=1000.0)
    assert (route["requests"], route["misses"], route["miss_rate"]) == (2, 1, 0.5)
