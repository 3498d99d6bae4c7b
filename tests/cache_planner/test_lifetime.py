"""The cache-lifetime decisions (`cache_planner.lifetime`) on small cases computed by hand from Anthropic's
published prices for Claude Sonnet: input $3/MTok, a 5-minute write 1.25x ($3.75), a 1-hour write 2x ($6), a
read 0.1x ($0.30) (platform.claude.com prompt-caching pricing; shared/reference/cost-truth-2026-11.md).

The gap models below are fed 200 sessions, so the catalogue prior (one pseudo-session) moves the figures by
well under the tolerances used."""

from __future__ import annotations

import pytest

from prefixgate.cache_planner.lifetime import (
    GapModel,
    TtlOption,
    choose_split,
    choose_write_ttl,
    keepalive,
)

SONNET = [TtlOption("5m", 300, 1.25, 0.1), TtlOption("1h", 3600, 2.0, 0.1)]
# Dollars for a 10,000-token prefix at Sonnet prices.
REWRITE_5M = 10_000 * 3.75 / 1e6     # 0.0375
READ = 10_000 * 0.30 / 1e6           # 0.003 (also the cost of a max_tokens: 0 pre-warm of the prefix)


def sessions(gap: float, returning: int, ending: int = 0) -> GapModel:
    """`returning` sessions come back once after `gap` seconds and stay open; `ending` never come back."""
    model = GapModel()
    for i in range(returning):
        model.observe(f"r{i}", 0.0)
        model.observe(f"r{i}", gap)
    for i in range(ending):
        model.observe(f"e{i}", 0.0)
        model.close(f"e{i}", 86_400.0)
    return model


def test_sessions_back_within_five_minutes_take_the_5m_write():
    # Half come back after a minute, half never: 1,000 new tokens cost 1000 x 1.25 to write, and the half that
    # come back read them at 0.1: 1250 + 0.5 x 1000 x 0.1 = 1300. Unmarked: 1000 now, and the half that come
    # back write them (1.25): 1000 + 625 = 1625. 1h: 2000 + 50 = 2050.
    choice = choose_write_ttl(sessions(60.0, 200, 200), SONNET, carried=0, fresh=1000)
    assert choice.ttl == "5m"
    assert choice.expected_cost == pytest.approx(1300, abs=2)


def test_sessions_back_after_twenty_minutes_take_the_1h_write():
    # All come back after 20 minutes: 1h costs 2000 + 1000 x 0.1 = 2100; 5m expires first, so the next request
    # writes again: 1250 + 1250 = 2500; unmarked: 1000 + 1250 = 2250.
    choice = choose_write_ttl(sessions(1200.0, 200), SONNET, carried=0, fresh=1000)
    assert choice.ttl == "1h"
    assert choice.expected_cost == pytest.approx(2100, abs=5)


def test_a_small_first_block_takes_1h_and_the_rest_5m():
    # 10,000 tokens read; a 30-token tool call, then a 970-token result. Half the next requests come within a
    # minute, half after 20 minutes. 1h on the call and 5m after it: 30 x 2 + 970 x 1.25 = 1272.5 now; the
    # quick half read all 11,000 (0.5 x 1100 = 550); the slow half read 10,030 at 0.1 and write 970 again at
    # 1.25 (0.5 x (1003 + 1212.5) = 1107.75): 2930.25. One 1h checkpoint: 2000 + 1100 = 3100; one 5m:
    # 1250 + 550 + 0.5 x 11,000 x 1.25 = 8675.
    p = {300: 0.5, 3600: 1.0, 86_400: 1.0}
    split = choose_split(lambda t: p[int(t)], SONNET, carried=10_000, anchor=10_030, end=11_000)
    assert (split.anchor, split.end) == ("1h", "5m")
    assert split.expected_cost == pytest.approx(2930.25)


def test_keepalive_refreshes_when_the_session_is_due_back_before_the_next_refresh():
    # Sessions come back after 400 s; a 5m entry is due to expire at 300 s. At 270 s (the refresh goes out
    # 30 s early) the session is certainly back within the next 5 minutes: a refresh ($0.003) saves writing
    # the prefix again ($0.0375) instead of reading it ($0.003): 0.0345 - 0.003 = 0.0315.
    decision = keepalive(sessions(400.0, 200), idle=270, expires_in=30, ttl_s=300, rewrite_cost=REWRITE_5M,
                         read_cost=READ, refresh_cost=READ)
    assert decision.refresh and decision.at == 270
    assert decision.expected_saving == pytest.approx(0.0315, abs=0.0005)


def test_keepalive_lets_it_expire_when_return_is_too_unlikely():
    # 5% come back after 400 s, the rest never: 0.05 x 0.0345 = 0.0017 of expected saving is less than the
    # $0.003 refresh (the break-even is 0.003 / 0.0345 = 8.7%).
    decision = keepalive(sessions(400.0, 10, 190), idle=270, expires_in=30, ttl_s=300, rewrite_cost=REWRITE_5M,
                         read_cost=READ, refresh_cost=READ)
    assert not decision.refresh


def test_keepalive_refreshes_a_1h_entry_through_a_two_hour_break():
    # Sessions come back after 100 minutes: a 1h entry refreshed at 59.5 min lasts to 119.5 min. One refresh of
    # $0.003 instead of a 1h write again (10,000 x $6/MTok = $0.06) less the read: saves 0.057 - 0.003 = 0.054.
    decision = keepalive(sessions(6000.0, 200), idle=3570, expires_in=30, ttl_s=3600, rewrite_cost=0.06,
                         read_cost=READ, refresh_cost=READ)
    assert decision.refresh
    assert decision.expected_saving == pytest.approx(0.054, abs=0.001)


def test_keepalive_never_pays_a_full_write_for_a_refresh():
    decision = keepalive(sessions(400.0, 200), idle=270, expires_in=30, ttl_s=300, rewrite_cost=REWRITE_5M,
                         read_cost=READ, refresh_cost=REWRITE_5M)
    assert not decision.refresh and "writing the prefix again" in decision.reason


def test_keepalive_never_on_a_route_where_nothing_repeats():
    model = sessions(400.0, 0, 50)
    decision = keepalive(model, idle=270, expires_in=30, ttl_s=300, rewrite_cost=REWRITE_5M, read_cost=READ,
                         refresh_cost=READ / 100)
    assert not decision.refresh and "nothing repeats" in decision.reason


def test_gap_model_counts_open_sessions_as_still_away():
    # 10 sessions came back after a minute (and have been idle since, 1540 s at `now`); 30 more have been idle
    # 10 minutes: of the 50 idle periods, 10 ended within 5 minutes.
    model = sessions(60.0, 10)
    for i in range(30):
        model.observe(f"o{i}", 1000.0)
    assert model.p_within(300, now=1600.0) == pytest.approx(10 / 50, abs=0.01)


def test_reuse_counts_saved_under_the_earlier_gap_bounds_still_load():
    from prefixgate.cache_planner.reuse import ReuseTracker

    # Saved with bounds 5m, 30m, 1h, 12h, 24h: 3 reuses within 5m, 5 within 30m, 6 within 1h, 8 within 12h.
    old = {"open": [], "stats": {"conversation": [10.0, 8.0, [3.0, 5.0, 6.0, 8.0, 8.0], 100.0]}}
    stats = ReuseTracker.from_dict(old).level("conversation")
    # A gap within 2h, 3h or 6h was only known to be within 12h.
    assert stats.within == [3.0, 5.0, 6.0, 8.0, 8.0, 8.0, 8.0, 8.0]


def _agent_day(ended: int) -> tuple[GapModel, float]:
    """One agent session: 8 bursts of 12 steps 20 s apart, each followed by a break of 10 to 45 minutes (all came
    back), and `ended` other sessions idle more than four hours (gone). Returns the model and the last request's time."""
    model, t = GapModel(), 0.0
    for burst in range(8):
        for _ in range(12):
            model.observe("agent", t)
            t += 20
        model.observe("agent", t)
        t += 600 + 300 * burst
    model.observe("agent", t)
    for i in range(ended):
        model.observe(f"ended-{i}", t - 4 * 3600 - i)
    return model, t


def test_a_session_never_seen_away_past_the_hour_is_kept_through_its_first_long_break():
    # A 50,000-token agent conversation on Sonnet 5.5 ($4/MTok 1h write, $0.10 read): a refresh of its 1h entry
    # costs $0.005 against $0.195 saved if the session is back within the next hour, so it pays from a 2.6% chance.
    # Nothing on the route has been away past an hour: the prior (breaks run to about three hours) answers.
    model, last = _agent_day(ended=0)
    decision = keepalive(model, idle=3570, expires_in=30, ttl_s=3600, rewrite_cost=50_000 * 4 / 1e6,
                         read_cost=50_000 * 0.1 / 1e6, refresh_cost=50_000 * 0.1 / 1e6, now=last + 3570)
    assert decision.refresh
    # Once the route has seen sessions gone past four hours, an hour's absence says the session has ended.
    model, last = _agent_day(ended=3)
    decision = keepalive(model, idle=3570, expires_in=30, ttl_s=3600, rewrite_cost=50_000 * 4 / 1e6,
                         read_cost=50_000 * 0.1 / 1e6, refresh_cost=50_000 * 0.1 / 1e6, now=last + 3570)
    assert not decision.refresh


def test_a_context_answers_from_its_own_idle_times_shrunk_to_the_routes():
    # 40 idle times that started early in a session came back after 10 minutes; 40 that started late never did.
    # Overall half come back; each context's own 40 outweigh the route's 16 pseudo-observations
    # (`lifetime.CONTEXT_PRIOR`): about (40 + 8) / 56 = 0.86 early and 8 / 56 = 0.14 late.
    model = GapModel()
    for i in range(40):
        model.observe(f"early-{i}", 0.0, context="early")
        model.observe(f"early-{i}", 600.0)
        model.observe(f"late-{i}", 0.0, context="late")
        model.close(f"late-{i}", 86_400.0)
    overall = model.p_return(270, 3870)
    early, late = (model.given(c).p_return(270, 3870) for c in ("early", "late"))
    assert early == pytest.approx(0.86, abs=0.05) and late == pytest.approx(0.14, abs=0.05)
    assert late < overall < early and model.given("") is model
