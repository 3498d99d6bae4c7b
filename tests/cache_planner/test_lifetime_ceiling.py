"""The online ceiling of the cache-lifetime benchmark (bench/lifetime_ceiling.py): the Bayes policy's decision
on a case worked by hand, the laws it is given, and that it never beats the hindsight expert (whose decision
space contains its own). Prices relative to plain input, Claude Sonnet's: read 0.1, 5m write 1.25, 1h write 2."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from prefixgate.simulation.replay import passthrough, replay
from tests.support_bench import bench_module

WRITE = {"5m": 1.25, "1h": 2.0}


@pytest.fixture(scope="module")
def bench():
    with bench_module("lifetime_ceiling") as ceiling, bench_module("lifetime_traces") as traces, \
            bench_module("lifetime_expert") as expert:
        yield ceiling, traces, expert


def test_a_turn_count_uniform_on_6_to_14_goes_on_as_counted(bench):
    ceiling, _, _ = bench
    more = ceiling.uniform_turns(6, 14)
    assert more(0) == 1.0             # every session has a second turn
    assert more(5) == pytest.approx(8 / 9)  # 6 turns done: 9 counts (6..14) reach it, 8 of them go on
    assert more(13) == 0.0            # 14 turns done: none has a 15th


def test_the_iid_law_mixes_uniform_replies_and_log_uniform_breaks(bench):
    ceiling, traces, _ = bench
    law = ceiling.iid_law(traces.Chat())   # replies 40-240 s, a quarter of gaps breaks of 6-40 min
    assert (law.within_5m, law.within_1h) == (0.75, 1.0)
    law = ceiling.iid_law(traces.Chat(reply_s=(100.0, 400.0), break_p=0.5, break_s=(200.0, 800.0)))
    # Half the gaps replies, (300 - 100) / 300 of them within 5 min; half breaks, log(300/200) / log(4) of them.
    assert law.within_5m == pytest.approx(0.5 * 200 / 300 + 0.5 * math.log(1.5) / math.log(4))   # 0.4796


def test_the_bayes_turn_weighs_the_next_turn_s_read_against_the_write(bench):
    ceiling, _, expert = bench
    # Turn 0: the static prefix (1,000 tokens) is readable, the conversation ends at 2,000; turn 1 ends at 2,500
    # and is the last. Turn 1 writes nothing (no turn after it): it costs 0.1 x read + the rest, i.e. 700 after
    # reading turn 0's 2,000 and 1,600 after reading the static 1,000 alone. Turn 0:
    #   none: 0.1 x 1000 + 1000 = 1100, then 1600          -> 2700
    #   5m:   0.1 x 1000 + 1000 x 1.25 = 1350, then p x 700 + (1 - p) x 1600
    #   1h:   0.1 x 1000 + 1000 x 2 = 2100, then 700 (every gap within the hour) -> 2800
    steps = [expert.Step(None, 0, 1, 1000, 2000), expert.Step(None, 0, 2, 1000, 2500, anchor=2400,
                                                              reads_anchor=True)]
    law = ceiling.GapLaw(0.75, 1.0, lambda k: 1.0)
    cost, option, _ = ceiling.decide(steps, 0, 1000, law, 0.1, WRITE, 0)
    assert (cost, option) == (pytest.approx(1350 + 0.75 * 700 + 0.25 * 1600), (None, "5m"))   # 2275
    law = ceiling.GapLaw(0.0, 1.0, lambda k: 1.0)   # 5m: 1350 + 1600 = 2950; none is cheapest
    cost, option, _ = ceiling.decide(steps, 0, 1000, law, 0.1, WRITE, 0)
    assert (cost, option) == (pytest.approx(2700.0), (None, None))


def test_the_ceiling_never_beats_the_hindsight_expert_and_the_simulator_takes_its_marks(bench):
    ceiling, traces, expert = bench
    case = traces.ChatCase(7, traces.Chat(sessions=3, turns=(4, 8), system_paragraphs=10))
    records = case()
    bayes = replay(ceiling.bayes_online(records, ceiling.online_laws(case, records).__getitem__), passthrough)
    marks = replay(expert.hindsight(records, refresh=False)[0], passthrough)
    assert not bayes.errors
    assert marks.total.cost.total <= bayes.total.cost.total


def test_with_upgrades_the_ceiling_upgrades_through_breaks_and_still_never_beats_the_expert(bench):
    """The online policy may also upgrade a 5m entry once the gap passes 5 minutes (keep-alive's upgrade through
    the reply); the hindsight expert with marks, refreshes and upgrades still does at least as well."""
    ceiling, traces, expert = bench
    case = traces.ChatCase(7, traces.Chat(sessions=3, turns=(4, 8), break_p=0.4, system_paragraphs=10))
    records = case()
    laws = ceiling.online_laws(case, records)
    marked = ceiling.bayes_online(records, laws.__getitem__, upgrades=True)
    bayes = replay(marked, passthrough)
    assert not bayes.errors and bayes.total.keepalives > 0
    plain = replay(ceiling.bayes_online(records, laws.__getitem__), passthrough)
    both = replay(expert.hindsight(records, refresh=True)[0], passthrough)
    assert both.total.cost.total <= bayes.total.cost.total < plain.total.cost.total


def test_a_person_seen_answering_slowly_is_expected_back_within_5_minutes_less_often(bench):
    ceiling, traces, _ = bench
    shape = traces.PacedChat(sessions=1, turns=(6, 6), propensity=(1.0, 20.0))
    records, _ = traces.paced_chat(3, shape)
    slow = [replace(r, t=420.0 * i) for i, r in enumerate(records)]
    laws = ceiling.paced_online_laws(slow, shape, particles=500)
    # Before any gap: the population's law; after five gaps of 7 minutes, a slow reader's.
    assert laws[-1].within_5m < laws[0].within_5m / 2
