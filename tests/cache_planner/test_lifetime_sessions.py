"""A conversation's own pace (`cache_planner.reuse`: `SessionGaps`, `SessionReturns`): what a session has shown
of its timing picks the context its next gap is predicted from, with the route's overall distribution as a prior
of `CONTEXT_PRIOR` gaps. Expected values are worked by hand from the rules in the module docstring: the
context is (median of the recent gaps over the shortest bound, 300 s, against the steps 0.25 / 0.5 / 1.0) plus
'late' when the last gap passed 300 s; P(within t) = rate x (in-context count within t + 16 x route share) /
(in-context gaps + 16), rate = (reuses + 0.5) / (requests + 1), route share = (within + 0.8) / (reuses + 1)."""

from __future__ import annotations

import pytest

from prefixgate.cache_planner.economics import choose_growing_ttl
from prefixgate.cache_planner.reuse import BOUNDS, ReuseStats, ReuseTracker, SessionGaps, SessionReturns
from prefixgate.providers.pricing import resolve_model


@pytest.mark.parametrize(("recent", "context"), [
    ((), ""),
    ((60.0,), "0"),                 # 60 / 300 = 0.2 <= 0.25
    ((100.0, 120.0, 400.0), "1late"),  # median 120 / 300 = 0.4 <= 0.5; the last gap passed 300 s
    ((200.0, 250.0, 100.0), "2"),   # median 200 / 300 = 0.67 <= 1.0
    ((60.0, 400.0), "3late"),       # median of two: the upper, 400 / 300 > 1.0
])
def test_a_session_context_is_its_pace_step_and_whether_its_last_gap_was_late(recent, context):
    assert SessionGaps(recent).context() == context


def test_a_session_keeps_only_its_latest_five_gaps():
    assert SessionGaps((1.0, 2.0, 3.0, 4.0, 5.0)).then(6.0).recent == (2.0, 3.0, 4.0, 5.0, 6.0)


def test_a_session_is_predicted_from_its_context_with_the_route_as_prior():
    # Route: 9 requests, 8 reuses, 4 of them within 300 s and all 8 within 1800 s.
    stats = ReuseStats(requests=9, reuses=8, within=[4.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0])
    # After a late gap, slow sessions came back 4 times, every time past 300 s but within 1800 s.
    stats.contexts["3late"] = [4.0, 0.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    slow = SessionReturns(stats, SessionGaps((400.0,)))
    rate = (8 + 0.5) / (9 + 1)                  # 0.85
    route_5m = (4 + 0.8) / (8 + 1)             # 0.5333
    assert slow.p_within(300) == pytest.approx(rate * (0 + 16 * route_5m) / (4 + 16))    # 0.3627
    route_30m = (8 + 0.8) / (8 + 1)
    assert slow.p_within(1800) == pytest.approx(rate * (4 + 16 * route_30m) / (4 + 16))  # 0.8478
    # A context the route has not seen answers as the route does.
    fresh = SessionReturns(stats, SessionGaps((30.0,)))
    assert fresh.p_within(300) == pytest.approx(stats.p_within(300)) == pytest.approx(rate * route_5m)


def test_the_tracker_carries_a_conversation_s_gaps_and_counts_each_gap_in_the_context_before_it():
    tracker = ReuseTracker()
    tracker.observe(0.0, ["s", "c1"], {"s": "static", "c1": "conversation"})
    tracker.observe(60.0, ["s", "c1", "c2"], {"s": "static", "c2": "conversation"})
    assert tracker.session("c2").recent == (60.0,)
    tracker.observe(460.0, ["s", "c1", "c2", "c3"], {"s": "static", "c3": "conversation"})
    assert tracker.session("c3").recent == (60.0, 400.0)
    stats = tracker.level("conversation")
    # The first gap (60 s) had no context yet; the second (400 s) came after a fast one ("0").
    assert stats.contexts[""] == [1.0, *[1.0] * len(BOUNDS)]
    assert stats.contexts["0"] == [1.0, 0.0, *[1.0] * (len(BOUNDS) - 1)]
    # Another conversation of the route starts with nothing shown.
    tracker.observe(500.0, ["s", "d1"], {"s": "static", "d1": "conversation"})
    assert tracker.session("d1").recent == ()
    again = ReuseTracker.from_dict(tracker.to_dict())
    assert again.session("c3").recent == (60.0, 400.0)
    assert again.level("conversation").contexts == stats.contexts


def test_a_slow_session_gets_the_hour_where_its_route_as_a_whole_gets_five_minutes():
    # Sonnet: read 0.1, write 1.25 (5m) / 2 (1h). 2,000 tokens carried, 200 new. With p5 and p1h the chances of
    # the next turn within 5 min / 1 h, a mark costs (per the growing-prefix rule, `economics.growing_cost`)
    # 2200 + 200 (w - 1) - p x 2200 x (1.25 - 0.1); 1h beats 5m when (p1h - p5) x 2530 > 150.
    price = resolve_model("anthropic", "claude-sonnet-5-5").price.price
    ttls = ("5m", "1h")
    stats = ReuseStats(requests=100, reuses=99, within=[95.0, 99.0, 99.0, 99.0, 99.0, 99.0, 99.0, 99.0])
    # Route: p5 = 0.995 x 0.958 = 0.953, p1h = 0.995 x 0.998 = 0.993: (0.040) x 2530 = 101 < 150: 5m.
    assert choose_growing_ttl(stats, price, ttls, 2000, 200).ttl == "5m"
    stats.contexts["3late"] = [16.0, 0.0, 16.0, 16.0, 16.0, 16.0, 16.0, 16.0, 16.0]
    # A session whose recent gaps were late: p5 = 0.995 x (0 + 16 x 0.958) / 32 = 0.477, p1h = 0.993:
    # (0.516) x 2530 = 1306 > 150: 1h.
    slow = SessionReturns(stats, SessionGaps((400.0, 350.0, 500.0)))
    assert choose_growing_ttl(slow, price, ttls, 2000, 200).ttl == "1h"
