"""A balanced route as a user runs it: `prefixgate serve` with a policy file in front of two `prefixgate
mock-providers` processes (two Anthropic deployments), the real anthropic SDK, and idle gaps passed by a clock
all three processes read (`clock_offset_file`). A session stays on its target through gaps shorter than the TTL,
moves when that target answers 503 (its faults file), stays where it moved, and moves again once its pin has
expired; each flip's re-write cost is on its ledger record, in /metrics and on the dashboard's route row."""

from __future__ import annotations

import os
import time
from decimal import Decimal

import anthropic
import httpx
import pytest
import yaml

from prefixgate.ledger import read_records
from tests.gateway.test_budgets_bind import prefixgate
from tests.gateway.test_sticky_routes import MODEL, READ, SYSTEM, WRITE_5M

WRITE_1H = Decimal("4")         # USD per million tokens: Sonnet 5.5's 1-hour cache write (2x its $2 input)

pytestmark = pytest.mark.slow


def test_a_balanced_route_through_prefixgate_serve(tmp_path):
    clock = tmp_path / "clock"
    clock.write_text("0")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFIXGATE_")}
    env["PREFIXGATE_CLOCK_OFFSET_FILE"] = str(clock)
    faults = tmp_path / "east-faults.yaml"
    # East refuses its fourth request with a 503 (once).
    faults.write_text(yaml.safe_dump({"faults": [{"fault": "status=503", "provider": "anthropic", "every": 4, "times": 1}]}))
    with prefixgate(["mock-providers", "--faults", str(faults)], tmp_path / "east.log", env) as east, \
            prefixgate(["mock-providers"], tmp_path / "west.log", env) as west:
        policy = tmp_path / "policy.yaml"
        policy.write_text(yaml.safe_dump({
            "upstreams": {"east": {"kind": "anthropic", "url": east}, "west": {"kind": "anthropic", "url": west}},
            "routes": [{"name": "claude", "models": [MODEL], "balance": "round_robin", "retry": {"attempts": 1},
                        "targets": [{"upstream": "east"}, {"upstream": "west"}]}]}))
        env.update(ANTHROPIC_API_KEY="sk-ant-gateway-key-000222", PREFIXGATE_POLICY_FILE=str(policy),
                   PREFIXGATE_LEDGER_PATH=str(tmp_path / "ledger.sqlite"))
        with prefixgate(["serve"], tmp_path / "gateway.log", env) as gw:
            client = anthropic.Anthropic(base_url=gw, api_key="caller", max_retries=0)
            sessions: dict[str, list[dict]] = {"a": [], "b": []}

            def turn(at: float, session: str, question: str) -> tuple[str, anthropic.types.Usage]:
                clock.write_text(str(at))
                history = sessions[session]
                history.append({"role": "user", "content": question})
                raw = client.messages.with_raw_response.create(model=MODEL, max_tokens=64, system=SYSTEM,
                                                               messages=history)
                reply = raw.parse()
                history.append({"role": "assistant", "content": reply.content[0].text})
                return raw.headers["x-prefixgate-target"], reply.usage

            steps = [turn(0, "a", "Is my toaster covered?"), turn(240, "a", "And my kettle?"),      # 4-minute gaps
                     turn(480, "a", "And my blender?"),
                     turn(540, "a", "And my fridge?"),       # east's 503: fails over to west
                     turn(600, "a", "And my oven?"),
                     turn(700, "b", "Is my lamp covered?"),  # a new session takes the next target in turn
                     turn(1000, "a", "And my iron?")]        # idle 400 s, past Claude's 5 minutes: placed anew
            assert [t for t, _ in steps] == ["east", "east", "east", "west", "west", "west", "east"]
            assert all(u.cache_read_input_tokens > 2000 for _, u in (steps[1], steps[2], steps[4]))

            def warm(u: anthropic.types.Usage) -> int:
                return u.cache_creation_input_tokens + u.cache_read_input_tokens

            deadline = time.monotonic() + 10
            while len(records := read_records(str(tmp_path / "ledger.sqlite"))) < 7 and time.monotonic() < deadline:
                time.sleep(0.05)
            flips = [r for r in sorted(records, key=lambda r: r["ts"]) if r["flip"]]
            assert [(r["flip"], r["flip_from"], r["target"], r["flip_tokens"]) for r in flips] == \
                [("failover", "east", "west", warm(steps[2][1])), ("expired", "west", "east", warm(steps[4][1]))]
            def write_price(u: anthropic.types.Usage) -> Decimal:
                """What the flipped request paid per token it wrote again: at the TTL it marked. The planner learns
                the session's gaps on the same clock, so after the 400 s one it marks the next write for an hour."""
                return WRITE_1H if u.cache_creation.ephemeral_1h_input_tokens else WRITE_5M

            costs = [Decimal(r["flip_cost_usd"]) for r in flips]
            assert costs == [warm(steps[2][1]) * (write_price(steps[3][1]) - READ) / 1_000_000,
                             warm(steps[4][1]) * (write_price(steps[6][1]) - READ) / 1_000_000]
            metrics = httpx.get(gw + "/metrics").text
            assert 'prefixgate_route_flips_total{reason="failover",route="claude"} 1.0' in metrics
            assert 'prefixgate_route_flips_total{reason="expired",route="claude"} 1.0' in metrics
            row = next(r for r in httpx.get(gw + "/api/breakdown", params={"by": "route"}).json()["rows"]
                       if r["name"] == "claude")
            assert row["flips"] == {"count": 2, "cost_usd": str(sum(costs).normalize())}
