"""Two gateway replicas sharing one real redis-server, in front of mock-providers, with the real OpenAI client: a
stored response created through one replica is its tenant's on the other (retrieve, continue), another tenant's
404 on both, and the other replica sends the follow-up to the account that stores it."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import ExitStack

import httpx
import openai
import pytest
import redis

from prefixgate.gateway.shared_later import SharedLater
from prefixgate.policies.schema import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for, shared_owner
from tests.support_services import ServerThread

ACME, GLOBEX = "gw-acme-key-0001", "gw-globex-key-0002"
MODEL = "gpt-5.4-mini"


def _policy(mock_url: str) -> dict:
    return {"upstreams": {"second": {"kind": "openai", "url": mock_url, "api_key_env": "OPENAI_SECOND_KEY"}},
            "routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"replicas": ["openai", "second"]}]},
                       {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
            "keys": [{"name": "acme-app", "key_sha256": hash_key(ACME), "tenant": "acme"},
                     {"name": "globex-app", "key_sha256": hash_key(GLOBEX), "tenant": "globex"}]}


@pytest.fixture
def mock(monkeypatch):
    """mock-providers; the route balances over two OpenAI accounts (mock-providers keeps each key's responses
    apart, as OpenAI keeps each organisation's)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-account-one-0001")
    monkeypatch.setenv("OPENAI_SECOND_KEY", "sk-account-two-0002")
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaReplicasStoredIds000000000000000")
    with ServerThread(mock_app(MockContext())) as server:
        yield server.url


@pytest.fixture
def replicas(tmp_path, redis_url, mock):
    """Replicas a and b on one Redis."""
    with ExitStack() as stack:
        urls = []
        for name in ("a", "b"):
            folder = tmp_path / name
            folder.mkdir()
            settings = settings_for(mock, folder, redis_url=redis_url)
            urls.append(stack.enter_context(running_gateway(settings, policy=policy_for(settings, _policy(mock)))).url)
        yield urls


def _client(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=url + "/v1", max_retries=0)


def test_a_stored_response_is_its_tenants_on_every_replica(replicas, redis_url):
    a, b = replicas
    for n in range(6):      # prompts of either account (prefix affinity picks one per prompt)
        created = _client(a, ACME).responses.create(model=MODEL, input=f"Name prime number {n}.")
        shared_owner(redis_url, "response", created.id)
        follow = _client(b, ACME).responses.create(model=MODEL, input="And another?", previous_response_id=created.id)
        assert follow.previous_response_id == created.id
        shared_owner(redis_url, "response", follow.id)
        assert _client(b, ACME).responses.retrieve(follow.id).id == follow.id
        assert _client(a, ACME).responses.retrieve(follow.id).id == follow.id
        for url in (a, b):
            with pytest.raises(openai.NotFoundError):
                _client(url, GLOBEX).responses.retrieve(created.id)
            with pytest.raises(openai.BadRequestError):     # OpenAI's previous_response_not_found
                _client(url, GLOBEX).responses.create(model=MODEL, input="x", previous_response_id=created.id)


@pytest.fixture
def slow_redis_writes(monkeypatch):
    """Every replica's shared write (who owns an id, where it lives) takes 0.3 s to reach Redis, as on a loaded
    Redis or a slow network."""
    write = SharedLater._write

    async def slowly(self, key, fields, expires):
        await asyncio.sleep(0.3)
        await write(self, key, fields, expires)

    monkeypatch.setattr(SharedLater, "_write", slowly)


@pytest.mark.parametrize("stream", [False, True])
def test_a_follow_up_sent_at_once_to_another_replica_finds_the_answer_it_continues(slow_redis_writes, replicas,
                                                                                    stream):
    """Behind a load balancer a caller's next turn may reach the other replica the moment its answer arrived:
    that replica knows the stored response's owner and home only from Redis, so the answer (a stream: its end)
    is sent only once they are there. Nothing in the test waits for Redis."""
    a, b = replicas
    for n in range(3):
        if stream:
            with _client(a, ACME).responses.stream(model=MODEL, input=f"Name prime number {n}.") as events:
                created = events.get_final_response()
        else:
            created = _client(a, ACME).responses.create(model=MODEL, input=f"Name prime number {n}.")
        follow = _client(b, ACME).responses.create(model=MODEL, input="And another?", previous_response_id=created.id)
        assert follow.previous_response_id == created.id


def test_an_explicit_cache_is_its_tenants_on_every_replica(replicas, redis_url):
    a, b = replicas
    manual = {"model": "models/gemini-3.5-flash", "ttl": "300s",
              "contents": [{"role": "user", "parts": [{"text": "The shipping manual, clause by clause. " * 600}]}]}
    created = httpx.post(a + "/v1beta/cachedContents", json=manual, headers={"x-goog-api-key": ACME}, timeout=30)
    assert created.status_code == 200, created.text
    name = created.json()["name"]
    shared_owner(redis_url, "cached_content", name.rpartition("/")[2])
    ask = {"cachedContent": name, "contents": [{"role": "user", "parts": [{"text": "Clause 3?"}]}]}
    for key, status in ((ACME, 200), (GLOBEX, 404)):
        got = httpx.get(f"{b}/v1beta/{name}", headers={"x-goog-api-key": key}, timeout=30)
        used = httpx.post(b + "/v1beta/models/gemini-3.5-flash:generateContent", json=ask,
                          headers={"x-goog-api-key": key}, timeout=30)
        assert (got.status_code, used.status_code) == (status, status), (got.text, used.text)


def test_a_restarted_gateway_still_sends_follow_ups_to_the_account_that_stores_them(tmp_path, mock):
    """Without Redis: the homes were kept in memory only, so after a restart a follow-up on a response stored by
    the route's second account went to the first and got the provider's 404."""
    settings = settings_for(mock, tmp_path)
    created = []
    with running_gateway(settings, policy=policy_for(settings, _policy(mock))) as gw:
        for n in range(6):      # prompts of either account (prefix affinity picks one per prompt)
            created.append(_client(gw.url, ACME).responses.create(model=MODEL, input=f"Name prime number {n}.").id)
    with running_gateway(settings, policy=policy_for(settings, _policy(mock))) as gw:
        for ident in created:
            assert _client(gw.url, ACME).responses.retrieve(ident).id == ident
            follow = _client(gw.url, ACME).responses.create(model=MODEL, input="And another?", previous_response_id=ident)
            assert follow.previous_response_id == ident


def _stored_on_the_second_account(mock: str) -> str:
    """A response the route's second account stores (created there directly, as an older gateway relayed it)."""
    second = openai.OpenAI(api_key="sk-account-two-0002", base_url=mock + "/v1", max_retries=0)
    return second.responses.create(model=MODEL, input="Name a prime number.").id


def _acme_reaches_it_and_globex_does_not(url: str, ident: str) -> None:
    assert _client(url, ACME).responses.retrieve(ident).id == ident
    follow = _client(url, ACME).responses.create(model=MODEL, input="And another?", previous_response_id=ident)
    assert follow.previous_response_id == ident
    with pytest.raises(openai.NotFoundError):
        _client(url, GLOBEX).responses.retrieve(ident)


def test_after_an_upgrade_the_owners_and_homes_in_the_older_ledger_tables_still_hold(tmp_path, mock):
    ident = _stored_on_the_second_account(mock)
    settings = settings_for(mock, tmp_path)
    db = sqlite3.connect(settings.ledger_path, isolation_level=None)     # the older version's tables and rows
    db.execute("CREATE TABLE owners (kind TEXT NOT NULL, id TEXT NOT NULL, owner TEXT NOT NULL, expires REAL NOT NULL, "
               "PRIMARY KEY (kind, id))")
    db.execute("CREATE TABLE response_homes (id TEXT PRIMARY KEY, upstream TEXT NOT NULL, expires REAL NOT NULL)")
    db.execute("INSERT INTO owners VALUES ('response', ?, 'tenant:acme', ?)", (ident, time.time() + 86400))
    db.execute("INSERT INTO response_homes VALUES (?, 'second', ?)", (ident, time.time() + 86400))
    db.close()
    with running_gateway(settings, policy=policy_for(settings, _policy(mock))) as gw:
        _acme_reaches_it_and_globex_does_not(gw.url, ident)


def test_during_a_rolling_upgrade_a_replica_reads_what_older_replicas_shared_in_redis(tmp_path, redis_url, mock):
    ident = _stored_on_the_second_account(mock)
    r = redis.Redis.from_url(redis_url)      # the older version's key names
    r.set(f"prefixgate:owner:response:{ident}", "tenant:acme", ex=86400)
    r.set(f"prefixgate:home:{ident}", "second", ex=86400)
    settings = settings_for(mock, tmp_path, redis_url=redis_url)
    with running_gateway(settings, policy=policy_for(settings, _policy(mock))) as gw:
        _acme_reaches_it_and_globex_does_not(gw.url, ident)
