"""The ledger: batched off the request path, nothing lost on a clean shutdown, shared through real Redis;
and a whole gateway run with Redis, a local target and a per-key budget."""

from __future__ import annotations

import json
import sqlite3
import time

import httpx
import openai
import pytest
import redis

from prefixgate.gateway.app import create_app
from prefixgate.ledger import STREAM, TOTALS, Ledger, LedgerRecord, read_records
from prefixgate.policies import hash_key
from tests.gateway.support_gateway import ServerThread, policy_for, settings_for

NOW = time.time()   # records within retention


def _rec(i: int) -> LedgerRecord:
    return LedgerRecord(id=f"r{i}", ts=NOW + i, route="r", target="openai", model="gpt-5.4", cache_read=i,
                        cache_writes={"5m": 2}, cost_usd="0.001", savings_usd="0.0005", explanation=[f"line {i}"])


def test_every_record_is_written_by_a_clean_shutdown(tmp_path):
    path = str(tmp_path / "l.sqlite")
    ledger = Ledger(path)
    for i in range(2000):
        ledger.append(_rec(i))
    ledger.close()
    rows = read_records(path)
    assert len(rows) == 2000
    assert rows[5]["cache_writes"] == {"5m": 2} and rows[5]["explanation"] == ["line 5"]
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_records_and_totals_are_shared_through_redis(tmp_path, redis_url):
    r = redis.Redis.from_url(redis_url)
    ledger = Ledger(str(tmp_path / "l.sqlite"), redis_url)
    for i in range(10):
        ledger.append(_rec(i))
    ledger.close()
    entries = r.xrange(STREAM)
    assert len(entries) == 10
    assert json.loads(entries[3][1][b"record"])["cache_read"] == 3
    totals = {k.decode(): int(v) for k, v in r.hgetall(TOTALS).items()}
    assert totals["requests"] == 10 and totals["cache_read_tokens"] == sum(range(10))
    assert totals["cost_picousd"] == 10_000_000_000  # exactly $0.01: no float drift


class EchoEngine:
    """A LocalTarget standing in for the in-process engine: answers like an OpenAI-compatible server."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []

    async def chat(self, body: dict, *, stream: bool):
        from prefixgate.dialects import openai as oa
        from prefixgate.usage import Usage

        self.bodies.append(body)
        usage = Usage(uncached_input=3, cache_read=96 if len(self.bodies) > 1 else 0, output=2)
        if not stream:
            return oa.build_response(body["model"], "local answer", usage)

        async def events():
            for ev in oa.stream_events(body["model"], ["local ", "answer"], usage):
                yield ev
        return events()


def test_gateway_with_redis_and_a_local_target(tmp_path, redis_url, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-unused-0000")
    settings = settings_for("http://127.0.0.1:9", tmp_path, redis_url=redis_url, local_model="smollm2-135m")
    policy = policy_for(settings, {
        "routes": [{"name": "local", "models": ["smollm2-135m"], "targets": [{"upstream": "local"}]},
                   {"name": "paid", "models": ["gpt-5.4"], "retry": {"attempts": 1, "timeout_s": 1},
                    "targets": [{"upstream": "openai"}]}],
        "keys": [{"name": "tiny", "key_sha256": hash_key("k-tiny")}]})
    engine = EchoEngine()
    with ServerThread(create_app(settings, policy=policy, local=engine)) as gw:
        client = openai.OpenAI(api_key="k-tiny", base_url=gw.url + "/v1", max_retries=0)
        first = client.chat.completions.create(model="smollm2-135m", messages=[{"role": "user", "content": "hi"}])
        second = client.chat.completions.create(model="smollm2-135m", messages=[{"role": "user", "content": "hi"}])
        assert first.choices[0].message.content == "local answer"
        assert second.usage.prompt_tokens_details.cached_tokens == 96
        text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="smollm2-135m", messages=[{"role": "user", "content": "hi"}], stream=True) if c.choices)
        assert text == "local answer"
        assert engine.bodies[-1]["stream_options"] == {"include_usage": True}
        # The upstream for gpt-5.4 is unreachable: the caller gets a 502 in OpenAI's shape.
        with pytest.raises(openai.APIStatusError) as exc:
            client.chat.completions.create(model="gpt-5.4", messages=[{"role": "user", "content": "hi"}])
        assert exc.value.status_code == 502 and "unreachable" in exc.value.message
    rows = read_records(settings.ledger_path)
    assert [r["route"] for r in rows] == ["local", "local", "local", "paid"]
    assert rows[1]["cache_read"] == 96 and rows[1]["cost_usd"] == "0" and rows[0]["miss_reason"]
    assert rows[3]["status"] == 502 and rows[3]["key"] == "tiny"
    assert len(redis.Redis.from_url(redis_url).xrange(STREAM)) == 4


@pytest.mark.parametrize("shared", [False, True], ids=["one replica", "through redis"])
def test_budget_exhaustion_is_a_429_in_the_callers_dialect(tmp_path, monkeypatch, request, shared):
    import anthropic

    from tests.gateway.support_gateway import running_gateway, running_upstream
    from tests.support_calendar import midday_zone
    from tests.support_services import wait_until

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-budget-0001")
    extra = {"redis_url": request.getfixturevalue("redis_url")} if shared else {}
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path, **extra)
        policy = policy_for(settings, {
            "routes": [{"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]}],
            "keys": [{"name": "small", "key_sha256": hash_key("k-small"), "budget": {"usd": 0.001, "period": "month"}}],
            "timezone": midday_zone()})      # no month starts again between the spend and the refusal
        with running_gateway(settings, policy=policy) as gw:
            client = anthropic.Anthropic(api_key="k-small", base_url=gw.url, max_retries=0)
            client.messages.create(model="claude-opus-5", max_tokens=5, messages=[{"role": "user", "content": "x"}])
            # The first answer's cost (> $0.001) is counted after it is sent; the next request is refused.

            def refused() -> bool:
                r = httpx.post(gw.url + "/v1/messages", headers={"x-api-key": "k-small"},
                               json={"model": "claude-opus-5", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})
                return r.status_code == 429 and r.json()["error"]["type"] == "rate_limit_error" and "retry-after" in r.headers
            wait_until(refused, 30, "budget enforced")
            assert len(up.received) == 1
