"""The response cache in Redis (a real redis-server): two `prefixgate serve` replicas serve each other's entries,
keys name no tenant and no prompt, entries expire at the route's TTL there, and an unreadable entry or an
unreachable Redis is a miss (or bypass) and a log line, never a 500."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from contextlib import ExitStack

import anthropic
import pytest
import redis
import yaml

from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_response_cache import KEYS, CountingUpstream, cache_stack, policy
from tests.gateway.test_response_cache import ASK, CACHE, SYSTEM, chat, oa
from tests.support_services import ServerThread, http_ok, refusing_port, start_on_free_port, wait_until

ON = {"mode": "on", "ttl_s": 600}


def serve(tmp, name: str, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    log = (tmp / f"{name}.log").open("w")

    def launch(port: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "prefixgate.cli", "serve", "--port", str(port)],
                                env={**env, "PREFIXGATE_LEDGER_PATH": str(tmp / f"{name}.sqlite")},
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        proc, port = start_on_free_port(launch, lambda p: http_ok(f"http://127.0.0.1:{p}/health"), name)
    except (TimeoutError, RuntimeError):
        pytest.fail((tmp / f"{name}.log").read_text()[-3000:])
    return proc, f"http://127.0.0.1:{port}"


class Gateway:
    def __init__(self, url: str) -> None:
        self.url = url


def stored_keys(r: redis.Redis, count: int) -> list[bytes]:
    """The entries' keys once `count` are stored: an answer is stored after it is sent (the gateway settles a
    request once the caller has it), so the caller can read Redis before the entry is there."""
    wait_until(lambda: len(r.keys("prefixgate:response:*")) >= count, 10, f"{count} stored response(s)")
    return r.keys("prefixgate:response:*")


def test_two_replicas_on_one_redis_serve_each_others_entries(tmp_path, redis_url):
    upstream = CountingUpstream(mock_app(MockContext()))
    with ServerThread(upstream) as mock, ExitStack() as stack:
        path = tmp_path / "policy.yaml"
        path.write_text(yaml.safe_dump(policy(gpt=ON, claude=ON)))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFIXGATE_")}
        env.update(KEYS, OPENAI_API_KEY="sk-gw-openai", ANTHROPIC_API_KEY="sk-ant-gw", PREFIXGATE_REDIS_URL=redis_url,
                   PREFIXGATE_POLICY_FILE=str(path), PREFIXGATE_OPENAI_BASE_URL=mock.url,
                   PREFIXGATE_ANTHROPIC_BASE_URL=mock.url, PREFIXGATE_LOG_LEVEL="warning")
        replicas = []
        for name in ("replica-a", "replica-b"):
            proc, url = serve(tmp_path, name, env)
            stack.callback(proc.wait, 20)
            stack.callback(proc.terminate)
            replicas.append(Gateway(url))
        a, b = replicas
        r = redis.Redis.from_url(redis_url)
        first, state = chat(oa(a))
        assert state == "miss" and len(upstream.posts) == 1
        stored_keys(r, 1)
        again, state = chat(oa(b))
        assert state == "hit" and len(upstream.posts) == 1
        assert again.choices[0].message.content == first.choices[0].message.content
        # The other way round, streamed, in Anthropic's format.
        ask = {"model": "claude-sonnet-5-5", "max_tokens": 200, "system": SYSTEM,
               "messages": [{"role": "user", "content": "What does a prefix cache keep?"}]}
        whole = anthropic.Anthropic(api_key=KEYS["ACME_KEY"], base_url=b.url, max_retries=0).messages.create(**ask)
        stored_keys(r, 2)
        with anthropic.Anthropic(api_key=KEYS["ACME_KEY"], base_url=a.url, max_retries=0).messages.stream(**ask) as s:
            assert "".join(s.text_stream) == whole.content[0].text
        assert len(upstream.posts) == 2
    # Keys are hashes: no tenant, key name or prompt text; each entry expires at the route's TTL.
    keys = [k.decode() for k in r.keys("prefixgate:response:*")]
    assert len(keys) == 2 and all(re.fullmatch(r"prefixgate:response:[0-9a-f]{64}", k) for k in keys)
    assert all(0 < r.pttl(k) <= 600_000 for k in keys)
    assert not any(word in " ".join(keys) for word in ("acme", "prefix cache", "gpt", "claude"))


def test_an_unreadable_entry_is_a_miss_and_a_log_line(tmp_path, redis_url, caplog):
    with cache_stack(tmp_path, policy(gpt=ON), redis_url=redis_url) as (up, gw, _):
        client = oa(gw)
        first, _ = chat(client)
        r = redis.Redis.from_url(redis_url)
        (key,) = stored_keys(r, 1)
        r.set(key, b'{"v": 1, "reply": "not an answer"')
        with caplog.at_level(logging.WARNING, logger="prefixgate.gateway"):
            logging.getLogger("prefixgate.gateway").addHandler(caplog.handler)
            again, state = chat(client)
        assert state == "miss" and len(up.posts) == 2
        assert again.choices[0].message.content == first.choices[0].message.content
        assert any("unreadable entry" in m for m in caplog.messages)
        assert chat(client)[1] == "hit" and len(up.posts) == 2      # the fresh answer replaced it


def test_an_unreachable_redis_is_a_bypass_not_an_error(tmp_path):
    with refusing_port() as port, cache_stack(tmp_path, policy(gpt=ON), redis_url=f"redis://127.0.0.1:{port}/0") \
            as (up, gw, _):
        client = oa(gw)
        assert chat(client)[1] == "bypass" and chat(client)[1] == "bypass" and len(up.posts) == 2
        raw = client.chat.completions.with_raw_response.create(model="gpt-5.5", messages=ASK, stream=True)
        assert raw.headers[CACHE] == "bypass" and len(list(raw.parse())) > 1


def test_a_redis_outage_is_one_log_line_not_one_a_request(tmp_path, caplog):
    """Every client of one Redis rests together after a failure (prefixgate/redis_outage.py): requests met while it
    rests are bypasses counted in the errors metric, not a warning each (an outage at 1,000 requests a second was
    1,000 lines a second). A warning comes with each call the cache made and Redis failed, and the outage is never
    silent: the first failure is the cache's (the first request's) or that of another client resting it first (the
    ledger's copy to Redis, on its own tick since 0931063; the tenant salts at start), which warns in its stead."""
    with refusing_port() as port, cache_stack(tmp_path, policy(gpt=ON), redis_url=f"redis://127.0.0.1:{port}/0") \
            as (up, gw, _):
        client = oa(gw)
        with caplog.at_level(logging.WARNING, logger="prefixgate.gateway"):
            states = [chat(client)[1] for _ in range(6)]
        store = gw.server.config.app.state.proxy.response_cache._redis
        assert states == ["bypass"] * 6 and len(up.posts) == 6
    # Records, not messages: an earlier test here leaves caplog's handler on the gateway's logger too (each twice).
    warned = len({id(r) for r in caplog.records if "response cache: store unreachable" in r.getMessage()})
    assert warned == store._window.failures
    others = [m for r in caplog.records if r.levelno >= logging.WARNING and "redis" in (m := r.getMessage().lower())
              and "response cache" not in m]
    assert warned == 1 or (warned == 0 and others)


def test_an_entry_is_served_only_as_the_routes_policy_now_allows(tmp_path, redis_url):
    # Entries in Redis outlive the gateway that stored them: after the operator shortens ttl_s or stops storing tool
    # calls (a replayed call runs its action again), a replica on the new policy must not serve the old entries.
    tool_ask = dict(model="gpt-5.5", input="Look it up.", tool_choice="required",
                    tools=[{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}])
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    with cache_stack(tmp_path / "old", policy(gpt={"mode": "on", "ttl_s": 86400, "tool_calls": True}),
                     redis_url=redis_url) as (up, gw, _):
        client = oa(gw)
        chat(client)
        client.responses.create(**tool_ask)
        assert chat(client)[1] == "hit" and len(up.posts) == 2
    # The text answer was stored two hours ago (Redis, told to keep it a day, still has it); the tool call just now.
    r = redis.Redis.from_url(redis_url)
    for key in r.keys("prefixgate:response:*"):
        entry = json.loads(r.get(key))
        if not entry["reply"]["tool_calls"]:
            r.set(key, json.dumps({**entry, "stored_at": entry["stored_at"] - 7200}), keepttl=True)
    with cache_stack(tmp_path / "new", policy(gpt={"mode": "on", "ttl_s": 3600, "tool_calls": False}),
                     redis_url=redis_url) as (up, gw, _):
        client = oa(gw)
        assert chat(client)[1] == "miss" and len(up.posts) == 1
        assert chat(client)[1] == "hit" and len(up.posts) == 1      # the fresh answer replaced the stale one
        assert client.responses.with_raw_response.create(**tool_ask).headers[CACHE] == "miss" and len(up.posts) == 2


def test_an_entry_for_a_model_since_retired_follows_the_routes_on_retired(tmp_path, redis_url):
    # claude-sonnet-4 was retired on 2026-06-15, replacement claude-sonnet-5-5 (Anthropic's model deprecations
    # page). Answers stored while the route sent it as asked (on_retired: warn) must not answer once the operator
    # refuses it (the 400 a miss gets) or replaces it (the replacement's answer, not the retired model's).
    def legacy(on_retired: str) -> dict:
        return {"routes": [{"name": "legacy", "models": ["legacy-bot"], "on_retired": on_retired, "response_cache": ON,
                            "targets": [{"upstream": "anthropic", "model": "claude-sonnet-4"}]}],
                "keys": policy()["keys"]}
    ask = {"model": "legacy-bot", "max_tokens": 200, "messages": [{"role": "user", "content": "What does a prefix cache keep?"}]}
    for name in ("warn", "refuse", "replace"):
        (tmp_path / name).mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PREFIXGATE_MOCK_TODAY", "2026-06-14")      # stored the day before: since then Anthropic's 404
        with cache_stack(tmp_path / "warn", legacy("warn"), redis_url=redis_url) as (up, gw, _):
            client = anthropic.Anthropic(api_key=KEYS["ACME_KEY"], base_url=gw.url, max_retries=0)
            assert client.messages.create(**ask).model == "claude-sonnet-4"
            assert client.messages.with_raw_response.create(**ask).headers[CACHE] == "hit" and len(up.posts) == 1
    with cache_stack(tmp_path / "refuse", legacy("refuse"), redis_url=redis_url) as (up, gw, _):
        client = anthropic.Anthropic(api_key=KEYS["ACME_KEY"], base_url=gw.url, max_retries=0)
        with pytest.raises(anthropic.BadRequestError, match="retired"):
            client.messages.create(**ask)
        assert up.posts == []
    with cache_stack(tmp_path / "replace", legacy("replace"), redis_url=redis_url) as (up, gw, _):
        client = anthropic.Anthropic(api_key=KEYS["ACME_KEY"], base_url=gw.url, max_retries=0)
        raw = client.messages.with_raw_response.create(**ask)
        assert raw.headers[CACHE] == "miss" and raw.parse().model == "claude-sonnet-5-5" and len(up.posts) == 1
        # The replacement's answer is stored (under the replacement's model) and served.
        raw = client.messages.with_raw_response.create(**ask)
        assert raw.headers[CACHE] == "hit" and raw.parse().model == "claude-sonnet-5-5" and len(up.posts) == 1


def test_a_damaged_stored_body_is_a_miss_for_a_streamed_request_too(tmp_path, redis_url):
    # A streamed request reads a tool-call entry's stored body (is a thought signature or a thinking block in it?):
    # an entry whose body is not JSON was a 500 there, where any other unreadable entry is a miss.
    tool_ask = dict(model="gpt-5.5", input="Look it up.", tool_choice="required",
                    tools=[{"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}])
    with cache_stack(tmp_path, policy(gpt={"mode": "on", "tool_calls": True}), redis_url=redis_url) as (up, gw, _):
        client = oa(gw)
        client.responses.create(**tool_ask)
        r = redis.Redis.from_url(redis_url)
        (key,) = stored_keys(r, 1)
        entry = json.loads(r.get(key))
        r.set(key, json.dumps({**entry, "native": entry["native"][:-7]}), keepttl=True)
        with client.responses.with_streaming_response.create(**tool_ask, stream=True) as resp:
            assert resp.headers[CACHE] == "miss" and list(resp.iter_lines())
        assert len(up.posts) == 2
