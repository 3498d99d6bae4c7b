"""A stored answer's record (its owner, its home, the prompt a request continuing it carries) is one write: one row
upsert in the gateway's file and one Redis write, not one for the owner and another for the tokens; a stream's id is
known as soon as its first event names it (in memory and Redis), and its row is written once, when it ends. Real
openai and google-genai clients, a real redis-server, mock-providers; the writes are counted by a trigger on the file's
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
from prefixgate.simulation.mock.faults import FaultPlan, FaultRule, parse_fault
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread, wait_until

KEY = "gw-one-write-key-0001"
GPT, FLASH = "gpt-5.4-mini", "gemini-3.5-flash"
SLOW = "gpt-5.4"        # its stream's events come 20 s apart: a follow-up lands while it runs
OTHER = "gw-one-write-key-0002"
MANUAL = "The shipping manual, clause by clause. " * 600


@pytest.fixture
def gateway(request, tmp_path, redis_url, monkeypatch) -> Iterator[tuple[str, Path]]:
    """(gateway URL, its ledger file), two keyed tenants, with Redis (unless the test's parameter says without); the
    file counts each write of `stored_ids`."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-one-write-openai-0001")
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaOneWriteGemini000000000000000000")
    policy = {"routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
                         {"name": "flash", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
              "keys": [{"name": "acme-app", "key_sha256": hash_key(KEY), "tenant": "acme"},
                       {"name": "globex-app", "key_sha256": hash_key(OTHER), "tenant": "globex"}]}
    ledger = tmp_path / "ledger.sqlite"
    slow = FaultPlan([FaultRule(parse_fault("event_delay=20"), model=SLOW)])
    with ServerThread(mock_app(MockContext(faults=slow))) as mock:
        settings = settings_for(mock.url, tmp_path, redis_url=redis_url if getattr(request, "param", True) else "")
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


def _client(url: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=url + "/v1", max_retries=0)


def test_a_stored_response_is_recorded_in_one_write_with_its_tokens(gateway, redis_url):
    url, ledger = gateway
    answer = _client(url).responses.create(model=GPT, input="Name a prime number.")
    tokens = answer.usage.input_tokens + answer.usage.output_tokens       # OpenAI's: a continuation carries both
    _settled(redis_url, "response", answer.id, tokens)
    assert _writes(ledger, answer.id) == 1
    shared = _shared(redis_url, "response", answer.id)
    assert (shared["owner"], shared["home"]) == ("tenant:acme", "openai")


def test_a_streamed_one_is_recorded_in_one_write_with_its_tokens(gateway, redis_url):
    url, ledger = gateway
    with _client(url).responses.stream(model=GPT, input="Name a prime number.") as stream:
        for _ in stream:
            pass
        answer = stream.get_final_response()
    _settled(redis_url, "response", answer.id, answer.usage.input_tokens + answer.usage.output_tokens)
    assert _writes(ledger, answer.id) == 1      # response.created and response.completed add none
    assert _client(url).responses.retrieve(answer.id).id == answer.id


@pytest.mark.parametrize("gateway", [True, False], indirect=True, ids=["redis", "alone"])
def test_a_stream_is_its_callers_from_its_first_event(gateway, redis_url, request):
    """The caller reads `response.created` and at once, on another connection, asks for the response and continues it
    (`previous_response_id`) while the stream runs: both are its own, before its row is written, with Redis or
    without; another tenant's key is refused it. Then it hangs up: the record is the one write."""
    url, ledger = gateway
    shared = request.node.callspec.params["gateway"]
    with _client(url).responses.create(model=SLOW, input="Name a prime number.", stream=True) as stream:
        created = next(iter(stream))
        assert created.type == "response.created"
        ident = created.response.id
        other = _client(url)            # its own connection
        assert other.responses.retrieve(ident).id == ident
        follow_up = other.responses.create(model=GPT, input="And the next one?", previous_response_id=ident)
        assert follow_up.previous_response_id == ident
        with pytest.raises(openai.NotFoundError):
            _client(url, OTHER).responses.retrieve(ident)
        if shared:
            wait_until(lambda: _shared(redis_url, "response", ident).get("owner") == "tenant:acme", 10,
                       "the owner shared when the stream began")
        assert _writes(ledger, ident) == 0      # known from the first event, its row not yet written
    wait_until(lambda: _writes(ledger, ident) == 1, 10, "the hung-up stream's record")


def test_an_explicit_cache_is_recorded_in_one_write_with_its_tokens(gateway, redis_url):
    url, ledger = gateway
    client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=url, api_version="v1beta"))
    cache = client.caches.create(model=FLASH, config=types.CreateCachedContentConfig(system_instruction=MANUAL,
                                                                                      ttl="300s"))
    ident = cache.name.rpartition("/")[2]       # cachedContents/{id}: kept by its id
    _settled(redis_url, "cached_content", ident, cache.usage_metadata.total_token_count)
    assert _writes(ledger, ident) == 1
