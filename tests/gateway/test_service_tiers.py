"""Priority classes reach hosted upstreams as the service tier they document, where a route opts in
(`service_tiers`), and a request is priced at the tier the upstream's answer says served it.

Published prices (https://developers.openai.com/api/docs/pricing; "Batch and Flex = 50%. Fast = 2x" in
../shared/reference/provider-caching.md), USD per million tokens, gpt-5.4: standard $2.50 input / $15 output,
flex $1.25 / $7.50, priority $5 / $30.
"""

from __future__ import annotations

from decimal import Decimal

import anthropic
import httpx
import openai
import pytest

from prefixgate.ledger import read_records
from prefixgate.policies import PolicyError, hash_key
from prefixgate.providers.pricing import cost_of
from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from prefixgate.usage import Usage
from tests.gateway.support_gateway import (
    ServerThread,
    policy_for,
    running_gateway,
    running_upstream,
    settings_for,
)
from tests.support_services import wait_until

MODEL = "gpt-5.4"
STANDARD, FLEX, PRIORITY = (Decimal("2.50"), Decimal("15")), (Decimal("1.25"), Decimal("7.50")), (Decimal("5"), Decimal("30"))
URGENT, BULK = "pg-urgent-key-0001", "pg-bulk-key-0002"
KEYS = [{"name": "urgent", "key_sha256": hash_key(URGENT), "priority": "high"},
        {"name": "bulk", "key_sha256": hash_key(BULK), "priority": "low"}]


def _usd(usage: Usage, rates: tuple[Decimal, Decimal]) -> Decimal:
    return (usage.uncached_input * rates[0] + usage.output * rates[1]) / 1_000_000


@pytest.mark.parametrize(("tier", "rates"), [("flex", FLEX), ("priority", PRIORITY), ("default", STANDARD), ("", STANDARD)])
def test_a_response_is_priced_at_the_published_rates_of_the_tier_that_served_it(tier, rates) -> None:
    usage = Usage(uncached_input=10_000, output=2_000, service_tier=tier)
    assert cost_of("openai", MODEL, usage).total == _usd(usage, rates)


def _policy(settings, tiers: dict | None, target: str = "openai") -> object:
    route = {"name": "chat", "models": ["*"], "targets": [{"upstream": target}]}
    return policy_for(settings, {"routes": [route | ({"service_tiers": tiers} if tiers else {})], "keys": KEYS})


def _records(settings, n: int) -> list[dict]:
    wait_until(lambda: len(read_records(settings.ledger_path)) >= n, 10, f"{n} ledger records")
    return sorted(read_records(settings.ledger_path), key=lambda r: r["ts"])


def _ledger_usage(rec: dict) -> Usage:
    return Usage(rec["uncached_input"], rec["cache_read"], rec["cache_writes"], rec["output"])


@pytest.mark.parametrize("stream", [False, True])
def test_a_low_key_is_sent_flex_and_its_answer_priced_at_flex(tmp_path, monkeypatch, stream) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-gateway-tiers")
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path)
        with running_gateway(settings, policy=_policy(settings, {"high": "priority", "low": "flex"})) as gw:
            client = openai.OpenAI(base_url=gw.url + "/v1", api_key=BULK)
            ask = {"model": MODEL, "messages": [{"role": "user", "content": "Summarise the night's logs."}]}
            if stream:
                chunks = list(client.chat.completions.create(**ask, stream=True))
                assert {c.service_tier for c in chunks} == {"flex"}
            else:
                assert client.chat.completions.create(**ask).service_tier == "flex"   # the tier that served it
    rec = _records(settings, 1)[0]
    assert rec["service_tier"] == "flex"
    assert Decimal(rec["cost_usd"]) == _usd(_ledger_usage(rec), FLEX)
    assert "service tier: flex asked (class low)" in rec["explanation"]


def test_a_request_served_at_default_is_priced_at_default_whatever_was_asked(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-gateway-tiers")
    # OpenAI's priority capacity is spent: the answer says default.
    context = MockContext(faults=FaultPlan.from_config({"faults": [{"fault": "served_tier=default"}]}))
    with ServerThread(mock_app(context)) as mock:
        settings = settings_for(mock.url, tmp_path)
        with running_gateway(settings, policy=_policy(settings, {"high": "priority"})) as gw:
            answer = openai.OpenAI(base_url=gw.url + "/v1", api_key=URGENT).responses.create(
                model=MODEL, input="Page the on-call engineer.")
    assert answer.service_tier == "default"
    rec = _records(settings, 1)[0]
    assert rec["service_tier"] == "default"
    assert Decimal(rec["cost_usd"]) == _usd(_ledger_usage(rec), STANDARD)
    assert "service tier: priority asked (class high)" in rec["explanation"]


def test_anthropic_gets_its_own_tier_names_and_its_answer_says_standard(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-gateway-tiers")
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path)
        policy = _policy(settings, {"high": "auto", "low": "standard_only"}, target="anthropic")
        with running_gateway(settings, policy=policy) as gw:
            message = anthropic.Anthropic(base_url=gw.url, api_key=BULK).messages.create(
                model="claude-sonnet-5-5", max_tokens=64, messages=[{"role": "user", "content": "Tag this ticket."}])
    assert message.usage.service_tier == "standard"
    rec = _records(settings, 1)[0]
    assert rec["service_tier"] == "standard" and "service tier: standard_only asked (class low)" in rec["explanation"]
    # Claude Sonnet 5.5 list prices: $2 input, $10 output per million tokens.
    assert Decimal(rec["cost_usd"]) == _usd(_ledger_usage(rec), (Decimal(2), Decimal(10)))


def test_a_route_without_service_tiers_never_sends_one_and_passes_the_callers_through(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-gateway-tiers")
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path)
        for tiers in (None, {"high": "priority"}):
            with running_gateway(settings, policy=_policy(settings, tiers)) as gw:
                def sent(key: str, **extra: str) -> dict:
                    r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                                   json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **extra},
                                   timeout=30)
                    assert r.status_code == 200, r.text
                    return up.received[-1].body
                if tiers is None:
                    # No opt-in: the gateway adds no tier for any class, and leaves the caller's own alone.
                    assert "service_tier" not in sent(URGENT) and "service_tier" not in sent(BULK)
                    assert sent(BULK, service_tier="flex")["service_tier"] == "flex"
                else:
                    # Opted in: the route decides; a class it names no tier for sends none, the caller's dropped.
                    assert sent(BULK, service_tier="priority").get("service_tier") is None
                    assert sent(URGENT, service_tier="flex")["service_tier"] == "priority"
    notes = [n for r in read_records(settings.ledger_path) for n in r["explanation"] if n.startswith("service tier")]
    assert "service tier: none for class low; the caller's 'priority' replaced" in notes
    assert "service tier: priority asked (class high); the caller's 'flex' replaced" in notes


def test_tier_names_are_checked_against_each_target_provider_at_load(tmp_path) -> None:
    settings = settings_for("http://127.0.0.1:9", tmp_path)
    with pytest.raises(PolicyError, match=r"routes.0.service_tiers.low: 'flex' is not a service tier of anthropic"):
        _policy(settings, {"low": "flex"}, target="anthropic")
    with pytest.raises(PolicyError, match=r"routes.0.service_tiers.high: 'standard_only' is not a service tier of openai"):
        _policy(settings, {"high": "standard_only"})
    with pytest.raises(PolicyError, match=r"routes.0.service_tiers: target 'gemini' \(gemini\) documents no service tier"):
        _policy(settings, {"low": "flex"}, target="gemini")
    with pytest.raises(PolicyError, match=r"routes.0.service_tiers.urgent: not a priority class"):
        _policy(settings, {"urgent": "priority"})
