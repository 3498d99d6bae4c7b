"""An attempt that times out before its first byte may still have been run, and billed, by the provider: it only
stopped answering in time. The gateway retried it and recorded the retry alone, so a key's ledger and budget
under-counted what the provider charged. Each such attempt is now a row of its own (kind `abandoned_attempt`),
priced at its prompt alone (the documented estimate: the body's size at 4 bytes a token, at the input price) and
spent against the key's budget. An attempt that never connected ran nothing and is billed nothing."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import httpx
import openai
import pytest
import redis

from prefixgate.gateway.app import create_app
from prefixgate.ledger import read_records
from prefixgate.policies.schema import hash_key
from tests.gateway.support_gateway import FakeUpstream, policy_for, running_upstream, settings_for
from tests.support_services import ServerThread, refusing_port, wait_until

CALLER = "pg-acme-timeouts-key-0001"
GPT_54_INPUT_PER_MTOK = Decimal("2.50")     # OpenAI's published gpt-5.4 input price (provider-caching.md)
MSG = [{"role": "user", "content": "Which of our plans covers a cracked screen?"}]


@contextmanager
def stack(tmp_path, monkeypatch, redis_url: str, targets: list[dict], upstreams: dict | None = None
          ) -> Iterator[tuple[FakeUpstream, openai.OpenAI, str]]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-gateway-openai-timeouts-01")
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path, redis_url=redis_url)
        policy = policy_for(settings, {
            "upstreams": upstreams or {},
            # timeout_s: a silent attempt (the upstream holds it until the gateway hangs up) is given up on at 3 s.
            "routes": [{"name": "gpt", "models": ["gpt-*"], "targets": targets,
                        "retry": {"attempts": 2, "backoff_s": 0.01, "timeout_s": 3}}],
            "keys": [{"name": "acme", "key_sha256": hash_key(CALLER), "budget": {"usd": 50.0, "period": "total"}}]})
        with ServerThread(create_app(settings, policy=policy)) as gw:
            yield up, openai.OpenAI(api_key=CALLER, base_url=gw.url + "/v1", max_retries=0, timeout=60), \
                settings.ledger_path


def rows(ledger: str, n: int) -> list[dict]:
    wait_until(lambda: len(read_records(ledger)) >= n, 10, f"{n} ledger rows")
    return read_records(ledger)


def test_an_attempt_that_timed_out_is_billed_on_a_row_of_its_own(tmp_path, monkeypatch, redis_url):
    with stack(tmp_path, monkeypatch, redis_url, [{"upstream": "openai", "model": "gpt-5.4"}]) as (up, client, ledger):
        up.fail("timeout")
        raw = client.chat.completions.with_raw_response.create(model="gpt-5.4", messages=MSG)
        assert raw.parse().choices[0].message.content == "Hello, world"
        sent = up.received[0].raw      # the bytes the silent attempt carried
        by_kind = {r["kind"]: r for r in rows(ledger, 2)}

        def totals() -> dict:
            return httpx.get(str(client.base_url).removesuffix("/v1/") + "/api/summary", params={"range": "1h"}).json()["totals"]
        both = sum(Decimal(r["cost_usd"]) for r in by_kind.values())
        wait_until(lambda: Decimal(totals()["spend_usd"]) == both, 10, "the dashboard's rollups to take both rows")
        dashboard = totals()
    assert set(by_kind) == {"", "abandoned_attempt"}
    answered, abandoned = by_kind[""], by_kind["abandoned_attempt"]
    assert answered["status"] == 200 and answered["attempts"] == 2
    tokens = math.ceil(len(sent) / 4)
    assert (abandoned["key"], abandoned["target"], abandoned["model"], abandoned["status"]) == ("acme", "openai", "gpt-5.4", 504)
    assert (abandoned["uncached_input"], abandoned["output"], abandoned["cache_read"]) == (tokens, 0, 0)
    assert Decimal(abandoned["cost_usd"]) == tokens * GPT_54_INPUT_PER_MTOK / 1_000_000
    assert any("estimated" in line and "never arrived" in line for line in abandoned["explanation"])
    assert abandoned["id"].startswith(raw.headers["x-prefixgate-request-id"])
    # The key's budget counts both: what the answer cost and what the abandoned attempt may have cost.
    spent = float(redis.Redis.from_url(redis_url).get("prefixgate:counter:spend:acme:all"))
    expected = sum(math.ceil(Decimal(r["cost_usd"]) * 10**9) for r in (answered, abandoned))
    assert spent == expected
    assert Decimal(dashboard["spend_usd"]) == Decimal(answered["cost_usd"]) + Decimal(abandoned["cost_usd"])
    # One caller's request, answered: the abandoned attempt is spend, not a second request nor an error (was 2 and 1).
    assert (dashboard["requests"], dashboard["errors"]) == (1, 0)


def test_every_attempt_that_timed_out_is_billed_when_none_answers(tmp_path, monkeypatch, redis_url):
    with stack(tmp_path, monkeypatch, redis_url, [{"upstream": "openai", "model": "gpt-5.4"}]) as (up, client, ledger):
        up.fail("timeout", "timeout")
        with pytest.raises(openai.APIStatusError) as exc:
            client.chat.completions.create(model="gpt-5.4", messages=MSG)
        assert exc.value.status_code == 504
        records = rows(ledger, 3)
    kinds = sorted(r["kind"] for r in records)
    assert kinds == ["", "abandoned_attempt", "abandoned_attempt"]
    failed = next(r for r in records if not r["kind"])
    assert failed["status"] == 504 and failed["cost_usd"] is None     # the attempts' rows carry what may be owed
    assert all(float(r["cost_usd"]) > 0 for r in records if r["kind"])


def test_an_attempt_that_never_connected_is_not_billed(tmp_path, monkeypatch, redis_url):
    with refusing_port() as port, stack(
            tmp_path, monkeypatch, redis_url,
            [{"upstream": "dead", "model": "gpt-5.4"}, {"upstream": "openai", "model": "gpt-5.4"}],
            {"dead": {"kind": "openai", "url": f"http://127.0.0.1:{port}"}}) as (up, client, ledger):
        raw = client.chat.completions.with_raw_response.create(model="gpt-5.4", messages=MSG)
        assert raw.headers["x-prefixgate-target"] == "openai"
        [record] = rows(ledger, 1)
    assert record["kind"] == "" and record["attempts"] == 3     # two refused connections, then the answer
