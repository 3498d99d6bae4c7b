"""The dashboard's rewrite figures and advice (issue 38): per route, what the static-first rewrite moved and
what the rewritten requests saved, read from real plans; and a fix recommends a planner mode only when the
route is not already in it."""

from __future__ import annotations

from dataclasses import replace

from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.cache_planner.detectors import volatile_spans
from prefixgate.dialects import anthropic
from prefixgate.gateway.dashboard.misses import misses_by_route
from prefixgate.gateway.dashboard.rewrites import rewrites_by_route
from prefixgate.ledger import LedgerRecord
from prefixgate.prefix_shape import prefix_shape

BODY = "Answer from the handbook and cite the section. " * 200


def planned_records(names: list[str], route: str = "desk") -> list[LedgerRecord]:
    state, out = PlannerState(), []
    for i, name in enumerate(names):
        conv = anthropic.parse_request({"model": "claude-sonnet-5-5", "max_tokens": 8, "system": f"The customer is {name}.\n{BODY}",
                                        "messages": [{"role": "user", "content": "hi"}]})
        p = plan(conv, Target("anthropic", "claude-sonnet-5-5"), state, route=route, now=i * 10.0)
        out.append(LedgerRecord(id=f"q{i}", ts=1000.0 + i, route=route, provider="anthropic", model="claude-sonnet-5-5",
                                uncached_input=20, cache_read=600 if i >= 2 else 0, cache_writes={} if i >= 2 else {"5m": 600},
                                explanation=p.explanation, plan_summary=p.summary, savings_usd="0.0015" if i >= 2 else "-0.0005",
                                segments=prefix_shape(p.conversation, "anthropic", volatile_spans)))
    return out


def test_per_route_the_dashboard_shows_what_the_rewrite_moved_and_saved():
    records = planned_records(["Jane Doe", "Omar Haddad", "Li Wei", "Priya Natarajan"])
    [desk] = rewrites_by_route(records, since=0)
    # Request 1 moved nothing (one request shows nothing varying); 2 learned the name; 3 and 4 held it.
    assert (desk["requests"], desk["rewritten"], desk["units_moved"]) == (4, 3, 3)
    assert desk["chars_moved"] == sum(len(f"The customer is {n}.\n") for n in ["Omar Haddad", "Li Wei", "Priya Natarajan"])
    assert desk["why"] == ["held", "learned"]
    assert desk["saved_usd"] == "0.0025" and desk["cache_read_tokens"] == 1200


def test_a_fix_never_recommends_the_mode_the_route_is_already_in():
    records = planned_records(["Jane Doe", "Omar Haddad", "Li Wei"])
    # A miss whose system prompt's date changed although the rewrite ran: the advice is not "run rewrite".
    dated = [replace(r, ts=2000.0 + i, id=f"d{i}", cache_read=0, cache_writes={"5m": 600},
                     segments=prefix_shape(anthropic.parse_request({"model": "claude-sonnet-5-5", "max_tokens": 8,
                                                                    "system": f"Today is 2026-03-0{i + 1}. {BODY}",
                                                                    "messages": [{"role": "user", "content": "hi"}]}),
                                           "anthropic", volatile_spans))
             for i, r in enumerate(records)]
    [route] = misses_by_route(dated, since=0)
    reason = route["top_reason"]
    assert reason["reason"] == "volatile_span"
    assert "planner mode `rewrite`" not in reason["fix"] and "`volatile` list" in reason["fix"]
    checkpoints_only = [replace(r, plan_summary=r.plan_summary.replace("mode=rewrite", "mode=checkpoints")) for r in dated]
    assert "planner mode `rewrite`" in misses_by_route(checkpoints_only, since=0)[0]["top_reason"]["fix"]
