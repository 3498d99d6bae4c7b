"""A balanced route as a user runs it: `prefixgate serve` with a policy file in front of two `prefixgate
mock-providers` processes (two Anthropic deployments), the real anthropic SDK. The session stays on its target,
moves when that target answers 503 (its faults file), stays where it moved, and the flip's re-write cost is on
the ledger record, in /metrics and on the dashboard's route row."""

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

pytestmark = pytest.mark.slow


def test_a_balanced_route_through_prefixgate_serve(tmp_path):
    faults = tmp_path / "east-faults.yaml"
    # East refuses the session's second request (the first that finds it pinned there) with a 503.
    faults.write_text(yaml.safe_dump({"faults": [{"fault": "status=503", "provider": "anthropic", "every": 2, "times": 1}]}))
    with prefixgate(["mock-providers", "--faults", str(faults)], tmp_path / "east.log") as east, \
            prefixgate(["mock-providers"], tmp_path / "west.log") as west:
        policy = tmp_path / "policy.yaml"
        policy.write_text(yaml.safe_dump({
            "upstreams": {"east": {"kind": "anthropic", "url": east}, "west": {"kind": "anthropic", "url": west}},
            "routes": [{"name": "claude", "models": [MODEL], "balance": "round_robin", "retry": {"attempts": 1},
                        "targets": [{"upstream": "east"}, {"upstream": "west"}]}]}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFIXGATE_")}
        env.update(ANTHROPIC_API_KEY="sk-ant-gateway-key-000222", PREFIXGATE_POLICY_FILE=str(policy),
                   PREFIXGATE_LEDGER_PATH=str(tmp_path / "ledger.sqlite"))
        with prefixgate(["serve"], tmp_path / "gateway.log", env) as gw:
            client = anthropic.Anthropic(base_url=gw, api_key="caller", max_retries=0)
            session: list[dict] = []
            targets, usages = [], []
            for question in ("Is my toaster covered?", "And my kettle?", "And my blender?", "And my fridge?"):
                session.append({"role": "user", "content": question})
                raw = client.messages.with_raw_response.create(model=MODEL, max_tokens=64, system=SYSTEM,
                                                               messages=session)
                reply = raw.parse()
                session.append({"role": "assistant", "content": reply.content[0].text})
                targets.append(raw.headers["x-prefixgate-target"])
                usages.append(reply.usage)
            assert targets == ["east", "west", "west", "west"]
            warm = usages[0].cache_creation_input_tokens + usages[0].cache_read_input_tokens
            assert usages[2].cache_read_input_tokens > warm
            deadline = time.monotonic() + 10
            while len(records := read_records(str(tmp_path / "ledger.sqlite"))) < 4 and time.monotonic() < deadline:
                time.sleep(0.05)
            flips = [r for r in records if r["flip"]]
            assert [(r["flip"], r["flip_from"], r["target"], r["flip_tokens"]) for r in flips] == \
                [("failover", "east", "west", warm)]
            cost = Decimal(flips[0]["flip_cost_usd"])
            assert cost == warm * (WRITE_5M - READ) / 1_000_000
            assert f'prefixgate_route_flip_cost_usd_total{{route="claude"}} {float(cost)}' in httpx.get(gw + "/metrics").text
            row = next(r for r in httpx.get(gw + "/api/breakdown", params={"by": "route"}).json()["rows"]
                       if r["name"] == "claude")
            assert row["flips"] == {"count": 1, "cost_usd": str(cost.normalize())}
