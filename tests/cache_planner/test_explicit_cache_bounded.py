"""A route remembers the explicit caches it created, one per static prefix, the most recently noted few: nothing
else forgets an expired one, so a route whose system prompt keeps changing would hold every cache it ever made."""

from __future__ import annotations

import time

from prefixgate.cache_planner import PlannerState, Target, stability
from tests.cache_planner.support_planning import POLICY, plan_body
from tests.gateway.test_gateway_explicit_cache import long_gap_history

MODEL = "gemini-3.5-flash"


def test_a_route_keeps_its_latest_explicit_caches_only(monkeypatch) -> None:
    monkeypatch.setattr(stability, "MAX_EXPLICIT", 3)
    state = PlannerState()
    long_gap_history(state, "r")
    now = time.time()
    hashes = []
    for i in range(5):
        body = {"systemInstruction": {"parts": [{"text": f"Desk {i}. " + POLICY * 6}]},
                "contents": [{"role": "user", "parts": [{"text": "Where is order 7?"}]}]}
        _, planned = plan_body("gemini", body, Target("gemini", MODEL), state, now=now + i, model=MODEL, mode="checkpoints")
        assert planned.cache_create is not None
        planned.adopt_cached_content(f"cachedContents/c{i}", now + 3600)
        hashes.append(planned.prefix_hash)
    assert len(set(hashes)) == 5
    assert state.route("r").explicit == {h: (f"cachedContents/c{i}", now + 3600) for i, h in enumerate(hashes) if i >= 2}
