"""`prompt_cache_key: derive` vs `keep` on sessions that share instructions, scored by the OpenAI cache simulator
(routing by the prompt's head plus prompt_cache_key, ~15 requests a minute per machine, each extra machine cold).

Each session is an agent loop: ~4,000 tokens of shared instructions, then a conversation growing ~800 tokens a
turn, sent with the session's own prompt_cache_key (as Codex CLI does). Prints the share of input tokens read
from cache under each mode. `derive` wins while one prefix's traffic fits one machine (every session after the
first reads the instructions); it loses once the sessions of one prefix together pass the overflow rate, since
the shared key's machines then take requests in turn and a session's conversation tail is read only on the
machine that served its last turn. That is why `keep` stays the default.

    .venv/bin/python bench/cache_key.py
"""

from __future__ import annotations

import json

from prefixgate.cache_planner import PlannerState, Target, plan
from prefixgate.dialects import DIALECTS
from prefixgate.simulation.simulator import Simulator

CHAT = DIALECTS["openai"]
TARGET = Target("openai", "gpt-4o")
INSTRUCTIONS = " rule" * 4000
# (name, sessions, turns per session, seconds between a session's turns, seconds between session starts)
WORKLOADS = [("3 sessions one after another", 3, 6, 20.0, 600.0), ("4 concurrent, 3 rpm each", 4, 6, 20.0, 3.0),
             ("10 concurrent, 6 rpm each", 10, 6, 10.0, 1.0), ("20 concurrent, 6 rpm each", 20, 6, 10.0, 0.5)]


def read_share(mode: str, sessions: int, turns: int, period: float, stagger: float) -> float:
    """Share of input tokens read from cache over the workload, every request planned under `mode`."""
    sim, state = Simulator(), PlannerState()
    history: dict[int, list[dict]] = {s: [] for s in range(sessions)}
    read = total = 0
    for when, s, t in sorted((s * stagger + t * period, s, t) for s in range(sessions) for t in range(turns)):
        history[s].append({"role": "user", "content": f"session {s} step {t}:" + " output" * (800 + s)})
        body = {"model": TARGET.model, "prompt_cache_key": f"session-{s}",
                "messages": [{"role": "system", "content": INSTRUCTIONS}, *history[s]]}
        planned = plan(CHAT.parse_request(json.dumps(body)), TARGET, state, route="agents", now=when,
                       cache_key=mode, tenant="acme")
        usage = sim.respond("openai", CHAT.encode_request(planned.conversation), now=when, tenant="acme").usage
        read, total = read + usage.cache_read, total + usage.cache_read + usage.uncached_input
        history[s].append({"role": "assistant", "content": f"done {t}"})
    return read / total


def main() -> None:
    print(f"{'workload':32s} {'keep':>6s} {'derive':>7s}")
    for name, *shape in WORKLOADS:
        print(f"{name:32s} {read_share('keep', *shape):6.3f} {read_share('derive', *shape):7.3f}")


if __name__ == "__main__":
    main()
