"""A stored answer's record (its owner, its home, the prompt a request continuing it carries) is one write: one row
upsert in the gateway's file and one Redis write, not one for the owner and another for the tokens. Real openai and
google-genai clients, a real redis-server, mock-providers; the writes are counted by a trigger on the file's
`stored_ids` table, the tokens are the provider's own usage as the client reads it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import openai
import pytest
import redis
from google import genai
from google.genai import types

from prefixgate.gateway.stored_ids import StoredIds
from prefixgate.policies.schema import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

KEY = "gw-one-write-key-0001"
GPT, FLASH = "gpt-5.4-mini", "gemini-3.5-flash"
MANUAL = "The shipping manual, clause by clause. " * 600


@pytest.fixture
def gateway(tmp_path, redis_url, monkeypatch) -> Iterator[tuple[str, Path]]:
    """(gateway URL, its ledger file), one keyed tenant, with Redis; the file counts each write of `stored_ids`."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-one-write-openai-0001")
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaOneWriteGemini000000000000000000")
    policy = {"routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
                         {"name": "flash", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
              "keys": [{"name": "acme-app", "key_sha256": hash_key(KEY), "tenant": "acme"}]}
    ledger = tmp_path / "ledger.sqlite"
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path, redis_url=redis_url)
        with running_gateway(settings, policy=policy_for(settings, policy)) as gw:
            with closing(sqlite3.connect(ledger)) as db:
                db.executescript("""
                    CREATE TABLE writes (kind TEXT, id TEXT);
                    CREATE TRIGGER inserted AFTER INSERT ON stored_ids BEGIN
                        INSERT INTO writes VALUES (new.kind, new.id); END;
                    CREATE TRIGGER updated AFTER UPDATE ON stored_ids BEGIN
                        INSERT INTO writes VALUES (new.kind, new.id); END;""")
            yield gw.url, ledger


def _writes(ledger: Path, ident: str) -> int:
    with closing(sqlite3.connect(ledger)) as db:
        return db.execute("SELECT count(*) FROM writes WHERE id = ?", (ident,)).fetchone()[0]


def _shared(redis_url: str, kind: str, ident: str) -> dict[str, str]:
    with redis.Redis.from_url(redis_url) as r:
        return {k.decode(): v.decode() for k, v in r.hgetall(f"{StoredIds.REDIS_PREFIX}{kind}:{ident}").items()}


def _settled(redis_url: str, kind: str, ident: str, tokens: int) -> None:
    # Redis is written after the answer is sent: waited for, never read once.
    wait_until(lambda: _shared(redis_url, kind, ident).get("tokens") == str(tokens), 10, f"{ident}'s tokens in Redis")


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=url + "/v1", max_retries=0)


def test_a_stored_response_is_recorded_in_one_write_with_its_tokens(gateway, redis_url):
    url, ledger = gateway
    answer = _client(url).responses.create(model=GPT, input="Name a prime number.")
    tokens = answer.usage.input_tokens + answer.usage.output_tokens       # OpenAI's: a continuation carries both
    _settled(redis_url, "response", answer.id, tokens)
    assert _writes(ledger, answer.id) == 1
    shared = _shared(redis_url, "response", answer.id)
    assert (shared["owner"], shared["home"]) == ("tenant:acme", "openai")


def test_a_streamed_one_is_recorded_as_it_begins_and_once_more_with_its_tokens(gateway, redis_url):
    url, ledger = gateway
    with _client(url).responses.stream(model=GPT, input="Name a prime number.") as stream:
        for _ in stream:
            pass
        answer = stream.get_final_response()
    _settled(redis_url, "response", answer.id, answer.usage.input_tokens + answer.usage.output_tokens)
    assert _writes(ledger, answer.id) == 2      # response.created, then the record: response.completed adds none
    assert _client(url).responses.retrieve(answer.id).id == answer.id


def test_an_explicit_cache_is_recorded_in_one_write_with_its_tokens(gateway, redis_url):
    url, ledger = gateway
    client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=url, api_version="v1beta"))
    cache = client.caches.create(model=FLASH, config=types.CreateCachedContentConfig(system_instruction=MANUAL,
                                                                                      ttl="300s"))
    ident = cache.name.rpartition("/")[2]       # cachedContents/{id}: kept by its id
    _settled(redis_url, "cached_content", ident, cache.usage_metadata.total_token_count)
    assert _writes(ledger, ident) == 1
