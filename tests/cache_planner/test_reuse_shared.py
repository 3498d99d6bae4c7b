"""Reuse evidence shared between planner replicas through Redis (`cache_planner/reuse_shared.py`), planned without a
gateway: a conversation whose turns alternate between two replicas, 3 minutes apart, is timed from its latest turn
on either; a replica just started plans with the route's counts; and with Redis not answering each replica plans
exactly as a single one does, saying so once in its log.

A turn back within 5 minutes reads a 5-minute entry: Anthropic bills a 5-minute write at 1.25x the input price and a
1-hour write at 2x, so a conversation whose user answers every 3 minutes is written for 5 minutes."""

from __future__ import annotations

import logging
import time

import pytest

from prefixgate.cache_planner import PlannerState, RedisStore, Target
from prefixgate.cache_planner.reuse import BOUNDS
from tests.cache_planner.support_planning import plan_body
from tests.support_services import wait_until

SONNET = Target("anthropic", "claude-sonnet-5-5")
GAP_S = 180.0
TURNS = 12


def turn_body(history: list[dict], i: int) -> dict:
    """The conversation with its `i`-th user turn (each long enough to be worth caching on its own)."""
    history.append({"role": "user", "content": f"Section {i}: " + " ".join(f"clause {i}.{j} holds." for j in range(400))})
    return {"model": SONNET.model, "max_tokens": 50, "system": "You review contracts.", "messages": list(history)}


def conversation(states: list[PlannerState]) -> list[str]:
    """`TURNS` turns `GAP_S` apart, planned by `states` in turn: the TTL each turn's last checkpoint was given."""
    history: list[dict] = []
    ttls = []
    for i in range(TURNS):
        out, _ = plan_body("anthropic", turn_body(history, i), SONNET, states[i % len(states)], route="chat",
                           now=1_000_000 + i * GAP_S)
        marks = [block["cache_control"] for m in out["messages"] for block in m["content"]
                 if isinstance(block, dict) and "cache_control" in block]
        ttls.append(marks[-1].get("ttl", "5m") if marks else "none")
        history.append({"role": "assistant", "content": "Noted."})
        shared(states)
    return ttls


class Writes:
    """A replica's touches for its writer thread (`SharedReuse._writes`, wrapped), counting those given and those the
    thread has sent to Redis: it takes them off the queue, then sends them in one round trip."""

    def __init__(self, state: PlannerState) -> None:
        reuse = state.store.reuse
        self.queue, self.given, self.taken, self.sent = reuse._writes, 0, 0, 0
        send = reuse._send_touches

        def sending(touches: dict) -> None:
            taken = self.taken
            send(touches)
            self.sent = taken
        reuse._writes, reuse._send_touches = self, sending
        state.writes = self

    def put(self, item: object) -> None:
        self.given += 1
        self.queue.put(item)

    def get(self, timeout: float | None = None) -> object:
        item = self.queue.get(timeout=timeout)
        self.taken += 1
        return item

    def get_nowait(self) -> object:
        item = self.queue.get_nowait()
        self.taken += 1
        return item

    def empty(self) -> bool:
        return self.queue.empty()


def sharing(redis_url: str, **kw: float) -> PlannerState:
    """A planner replica on Redis whose writer thread's touches are counted (`Writes`)."""
    state = PlannerState(store=RedisStore(redis_url), **kw)
    Writes(state)
    return state


def shared(states: list[PlannerState]) -> None:
    """Wait for the replicas' writer threads to have sent what the last turn touched (the next turn, on the other
    replica, reads it from Redis)."""
    for state in states:
        writes = getattr(state, "writes", None)
        if writes is not None:
            wait_until(lambda w=writes: w.sent == w.given, 10, "the turn's touches sent to Redis")


def test_turns_alternating_between_replicas_get_the_ttls_one_replica_gives_them(redis_url: str) -> None:
    one = conversation([PlannerState()])
    assert one[1:] == ["5m"] * (TURNS - 1)
    a, b = (sharing(redis_url, publish_every_s=0) for _ in range(2))
    assert conversation([a, b]) == one
    for replica in (a, b):
        stats = replica.routes["chat"].reuse.level("conversation")
        assert stats.reuses and stats.within[BOUNDS.index(300.0)] == stats.reuses     # every gap within 5 minutes


def test_a_replica_just_started_plans_with_the_routes_counts(redis_url: str) -> None:
    a = sharing(redis_url, publish_every_s=0)
    conversation([a])
    time.sleep(1.5)      # a's writer thread shares its counts at most once a second
    plan_body("anthropic", turn_body([], 0), SONNET, a, route="chat", now=1_000_000 + TURNS * GAP_S)
    shared([a])
    time.sleep(0.2)
    late = PlannerState(store=RedisStore(redis_url))
    plan_body("anthropic", turn_body([], 0), SONNET, late, route="chat", now=1_000_000 + TURNS * GAP_S)
    assert late.routes["chat"].reuse.level("conversation").reuses >= TURNS - 1


def test_with_redis_down_each_replica_plans_as_one_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="prefixgate.planner")
    down = PlannerState(store=RedisStore("redis://127.0.0.1:1", retry_s=0))     # nothing listens on port 1
    assert conversation([down]) == conversation([PlannerState()])
    assert [r.message for r in caplog.records].count(
        "planner: redis unreachable (ConnectionError); each replica learns reuse gaps from its own requests until it "
        "answers (a conversation alternating between replicas shows each longer gaps)") == 1
