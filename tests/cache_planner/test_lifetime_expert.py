"""The cache-lifetime benchmark's hindsight expert (bench/lifetime_expert.py) is an optimum the simulator agrees
with: the cost it plans is what the provider simulator bills for its marks and refreshes, to the token, and no
online plan of the same traffic does better."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from prefixgate.cache_planner.trace import replay_strategy
from prefixgate.providers.pricing import resolve_model
from prefixgate.simulation.replay import passthrough, replay
from tests.support_bench import bench_module


@pytest.fixture(scope="module")
def bench():
    with bench_module("lifetime_expert") as expert, bench_module("lifetime_traces") as traces:
        yield expert, traces


def input_cost(report) -> Decimal:
    cost = report.total.cost
    return cost.uncached_input + cost.cache_read + cost.cache_write


@pytest.mark.parametrize("refresh", [False, True])
def test_the_planned_cost_is_the_simulators_bill(bench, refresh):
    expert, traces = bench
    records = traces.agent_day(5, traces.AgentDay(bursts=4, steps=(3, 6), tools=3, system_paragraphs=8,
                                                  breaks=((0.5, 400.0, 900.0), (0.5, 3700.0, 5000.0))))
    marked, planned = expert.hindsight(records, refresh=refresh)
    report = replay(marked, passthrough)
    assert not report.errors
    per_token = resolve_model("anthropic", records[0].model).price.price.input / Decimal(1_000_000)
    assert input_cost(report) == pytest.approx(Decimal(str(planned)) * per_token, rel=Decimal("1e-9"))
    # Two of the four breaks pass an hour: refreshing a 1h entry once beats writing the conversation again.
    assert (report.total.keepalives > 0) == refresh


def test_refreshes_only_help_and_no_online_plan_beats_the_expert(bench):
    expert, traces = bench
    records = traces.human_chat(6, traces.Chat(sessions=3, turns=(4, 8), system_paragraphs=10))
    marks = replay(expert.hindsight(records, refresh=False)[0], passthrough).total.cost.total
    both = replay(expert.hindsight(records, refresh=True)[0], passthrough).total.cost.total
    planner = replay(records, replay_strategy()).total.cost.total
    assert both <= marks <= planner


def test_the_expert_upgrades_through_replies_and_its_plan_is_still_the_bill(bench):
    """With the replies in the trace the expert may upgrade a 5m conversation entry through the reply (one read of
    the prefix, the reply written 1h) instead of marking the turn before a break 1h; what it plans is billed."""
    expert, traces = bench
    records = traces.human_chat(8, traces.Chat(sessions=4, turns=(5, 9), break_p=0.4, system_paragraphs=10))
    marked, planned = expert.hindsight(records, refresh=True)
    report = replay(marked, passthrough)
    assert not report.errors
    per_token = resolve_model("anthropic", records[0].model).price.price.input / Decimal(1_000_000)
    assert input_cost(report) == pytest.approx(Decimal(str(planned)) * per_token, rel=Decimal("1e-9"))
    def through_a_reply(r) -> bool:    # an upgrade, or a refresh of an upgraded entry: the reply, then the filler
        return r.keepalive and r.body["messages"][-1] == {"role": "user", "content": "."} and len(r.body["messages"]) > 1
    assert any(through_a_reply(r) for r in marked)
    bare = [replace(r, response=None) for r in records]
    without, _ = expert.hindsight(bare, refresh=True)
    assert not any(through_a_reply(r) for r in without)
    assert report.total.cost.total <= replay(without, passthrough).total.cost.total
