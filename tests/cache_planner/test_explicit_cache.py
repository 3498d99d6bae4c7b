"""Gemini explicit caches: created when long gaps defeat the implicit cache often enough to pay for
storage, used without resending system instruction and tools, billed in replay."""

from __future__ import annotations

from decimal import Decimal

from prefixgate.cache_planner.trace import plan_trace
from prefixgate.providers.trace import TraceRecord
from prefixgate.simulation.replay import passthrough, replay
from tests.cache_planner.support_planning import POLICY

MODEL = "gemini-3.5-flash"


def trace(gap: float, n: int = 30) -> list[TraceRecord]:
    system = {"parts": [{"text": POLICY * 6}]}  # past 3.5 Flash's 4,096-token minimum (G1)
    tools = [{"functionDeclarations": [{"name": "lookup_order", "description": "Find an order by id"}]}]
    return [TraceRecord(line=i + 1, t=i * gap, provider="gemini", model=MODEL, route="assistant", output_tokens=50,
                        body={"systemInstruction": system, "tools": tools,
                              "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
                              "contents": [{"role": "user", "parts": [{"text": f"Where is order {i}?"}]}]})
            for i in range(n)]


def test_long_gaps_get_an_explicit_cache_that_pays():
    records = trace(gap=400)  # every 6-7 minutes: the implicit cache has always lapsed
    base = replay(records, passthrough).total
    planned = replay(records, __import__("prefixgate.simulation.replay", fromlist=["planner"]).planner(),
                     strategy_name="planner")
    assert not planned.errors
    total = planned.total
    assert total.usage.cache_writes.get("explicit", 0) > 0 and total.usage.cache_read > 0
    assert total.cost.storage > 0  # storage is billed
    # 9 reads an hour of 6,860 tokens at $0.15 instead of $1.50, against $1.00/MTok/h storage and the create.
    assert total.cost.total < base.cost.total * Decimal("0.8")


def test_frequent_traffic_relies_on_implicit_caching():
    records = trace(gap=30)
    planned = replay(records, __import__("prefixgate.simulation.replay", fromlist=["planner"]).planner())
    assert planned.total.usage.cache_writes.get("explicit", 0) == 0
    assert planned.total.usage.cache_read > 0


def test_plan_command_reports_the_cache_it_would_create():
    out = list(plan_trace(trace(gap=600, n=8)))
    creates = [o for o in out if "cache_create" in o]
    assert creates, [o["plan"] for o in out]
    body = creates[0]["cache_create"]
    assert body["model"] == f"models/{MODEL}" and "systemInstruction" in body and "tools" in body
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}} and body["ttl"].endswith("s")
