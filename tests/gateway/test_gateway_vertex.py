"""Vertex AI through the gateway, against mock-providers' Vertex (which takes only the OAuth2 tokens it issued,
or its static token, as Google does): `AnthropicVertex` and google-genai with `vertexai=True` pointed at the
gateway, an Anthropic client routed to Vertex by policy, two replicas sharing one planner-created context
cache through Redis, the gateway's own service-account credentials refreshed once on a 401, and Claude Code
in Vertex mode. A dated system prompt misses every time when sent straight to Vertex; through the gateway
the second call reads the cache, and the ledger prices each path exactly at Vertex's rows."""

from __future__ import annotations

import os
import subprocess
import time
from decimal import Decimal

import anthropic
import httpx
import pytest
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

from prefixgate.cache_planner import PlannerState, RedisStore
from prefixgate.ledger import read_records
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.gateway.support_vertex import (
    CLAUDE,
    GEMINI,
    LOCATION,
    PROJECT,
    STATIC_TOKEN,
    claude_golden,
    dated_system,
    gemini_golden,
    genai_vertex_caller,
    service_account_file,
    use_mock_vertex,
)
from tests.gateway.test_gateway_explicit_cache import long_gap_history
from tests.support_services import ServerThread, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def vertex_env(monkeypatch: pytest.MonkeyPatch) -> None:
    use_mock_vertex(monkeypatch)


@pytest.fixture
def mock_server(vertex_env):
    ctx = MockContext()
    with ServerThread(mock_app(ctx)) as server:
        yield server.url, ctx


@pytest.fixture
def mock(mock_server) -> str:
    return mock_server[0]


@pytest.fixture
def gateway(mock, tmp_path):
    """(gateway URL, ledger path): no policy file, the built-in `vertex` upstream pointed at the mock."""
    settings = settings_for(mock, tmp_path, vertex_base_url=mock)
    with running_gateway(settings) as gw:
        yield gw.url, settings.ledger_path


def ledger(path: str, n: int) -> list[dict]:
    wait_until(lambda: len(read_records(path)) >= n, 10, f"{n} ledger records")
    return sorted(read_records(path), key=lambda r: r["ts"])


def claude_client(base_url: str, token: str = "gateway-key") -> anthropic.AnthropicVertex:
    """A client of `base_url`: the gateway takes a gateway key; Vertex (the mock) only Google tokens."""
    return anthropic.AnthropicVertex(base_url=base_url, region=LOCATION, project_id="caller-project",
                                     access_token=token, max_retries=0)


def claude_args(at: float) -> dict:
    return {"model": CLAUDE, "max_tokens": 40, "system": dated_system(at),
            "messages": [{"role": "user", "content": "Where is order 7?"}]}


def test_anthropic_vertex_create_and_stream_read_what_direct_calls_miss(mock, gateway):
    gw, path = gateway
    t = time.time()
    direct = claude_client(f"{mock}/v1", STATIC_TOKEN)
    misses = [direct.messages.create(**claude_args(t + i)).usage for i in range(2)]
    assert misses[1].cache_read_input_tokens == 0          # the time at the top breaks the prefix
    client = claude_client(f"{gw}/v1")
    first = client.messages.create(**claude_args(t + 10))
    with client.messages.stream(**claude_args(t + 11)) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert first.content[0].text and text
    # Everything before the moved time is read; the time (now after the rules) and the question are new.
    assert final.usage.cache_read_input_tokens > 7000
    assert (final.usage.cache_read_input_tokens + final.usage.input_tokens
            == first.usage.cache_creation_input_tokens + first.usage.input_tokens)
    records = ledger(path, 2)
    assert [(r["dialect"], r["provider"], r["model"]) for r in records] == [("vertex_anthropic", "vertex", CLAUDE)] * 2
    assert [Decimal(r["cost_usd"]) for r in records] == [claude_golden(first.usage.model_dump()),
                                                         claude_golden(final.usage.model_dump())]


def test_claude_paths_under_vertex_ai_and_errors_in_anthropics_shape(gateway):
    gw, _ = gateway
    answer = claude_client(f"{gw}/vertex_ai/v1").messages.create(**claude_args(time.time()))
    assert answer.content[0].text
    url = f"{gw}/v1/projects/p/locations/{LOCATION}/publishers/anthropic/models/{CLAUDE}:rawPredict"
    bad = httpx.post(url, json={"model": CLAUDE, "max_tokens": 5, "messages": []})
    assert bad.status_code == 400 and bad.json()["type"] == "error"
    assert bad.json()["error"]["message"].startswith("model: not allowed")


def test_an_anthropic_client_routed_to_vertex_by_policy_keeps_its_cache_control(mock, tmp_path):
    settings = settings_for(mock, tmp_path, vertex_base_url=mock)
    policy = policy_for(settings, {
        "upstreams": {"vertex-us": {"kind": "vertex", "project": PROJECT, "location": LOCATION, "url": mock}},
        "routes": [{"name": "claude", "models": ["claude-haiku-4-5"],
                    "targets": [{"upstream": "vertex-us", "model": CLAUDE}]}]})
    with running_gateway(settings, policy=policy) as gw:
        client = anthropic.Anthropic(base_url=gw.url, api_key="caller", max_retries=0)
        t = time.time()
        marked = {"type": "text", "text": dated_system(t), "cache_control": {"type": "ephemeral", "ttl": "1h"}}
        answers = [client.messages.with_raw_response.create(
            model="claude-haiku-4-5", max_tokens=40, system=[marked],
            messages=[{"role": "user", "content": "Where is order 7?"}]) for _ in range(2)]
        assert {a.headers["x-prefixgate-target"] for a in answers} == {"vertex-us"}
        usages = [a.parse().usage for a in answers]
    # The caller's own 1-hour marker went to Vertex as written: the write is a 1h write.
    assert usages[0].cache_creation.ephemeral_1h_input_tokens > 1024
    assert usages[1].cache_read_input_tokens == usages[0].cache_creation_input_tokens
    records = ledger(settings.ledger_path, 2)
    assert [Decimal(r["cost_usd"]) for r in records] == [claude_golden(u.model_dump()) for u in usages]


def test_genai_vertex_generate_and_stream_read_the_cache(mock, gateway):
    gw, path = gateway
    client = genai_vertex_caller(gw)
    t = time.time()
    config = lambda at: types.GenerateContentConfig(system_instruction=dated_system(at))  # noqa: E731
    first = client.models.generate_content(model=GEMINI, contents="Where is order 7?", config=config(t))
    chunks = list(client.models.generate_content_stream(model=GEMINI, contents="Where is order 7?", config=config(t + 1)))
    assert first.text and "".join(c.text or "" for c in chunks)
    usage = chunks[-1].usage_metadata
    assert not first.usage_metadata.cached_content_token_count
    assert usage.cached_content_token_count > 1024
    records = ledger(path, 2)
    assert [(r["dialect"], r["provider"]) for r in records] == [("vertex_gemini", "vertex")] * 2
    assert [Decimal(r["cost_usd"]) for r in records] == [gemini_golden(first.usage_metadata.model_dump()),
                                                         gemini_golden(usage.model_dump())]
    bad = httpx.post(f"{gw}/v1beta1/projects/p/locations/{LOCATION}/publishers/google/models/{GEMINI}:generateContent",
                     json={"contents": []})
    assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_two_replicas_sharing_redis_reuse_one_planner_created_context_cache(mock, tmp_path, redis_url):
    states = [PlannerState(store=RedisStore(redis_url)) for _ in range(2)]
    for state in states:
        long_gap_history(state, "-/warranty")
    config = types.GenerateContentConfig(system_instruction=dated_system(0.0, dated=False))
    answers, paths = [], []
    for i, state in enumerate(states):
        settings = settings_for(mock, tmp_path / f"replica{i}", vertex_base_url=mock, redis_url=redis_url)
        (tmp_path / f"replica{i}").mkdir()
        with running_gateway(settings, planner_state=state) as gw:
            client = genai.Client(vertexai=True, project="caller-project", location=LOCATION,
                                  credentials=Credentials("gateway-key"), http_options=types.HttpOptions(
                                      base_url=gw.url, headers={"x-prefixgate-route": "warranty"}))
            answers.append(client.models.generate_content(model=GEMINI, contents=f"Is item {i} covered?", config=config))
        paths.append(settings.ledger_path)
    caches = [state.route("-/warranty").explicit for state in states]
    assert caches[0] == caches[1] and len(caches[0]) == 1
    name = next(iter(caches[0].values()))[0]
    assert name.startswith(f"projects/{PROJECT}/locations/{LOCATION}/cachedContents/")
    listed = httpx.get(f"{mock}/v1beta1/projects/{PROJECT}/locations/{LOCATION}/cachedContents",
                       headers={"authorization": f"Bearer {STATIC_TOKEN}"}).json()
    assert [c["name"] for c in listed.get("cachedContents", [])] == [name]     # one cache, not one per replica
    assert answers[0].usage_metadata.cached_content_token_count == answers[1].usage_metadata.cached_content_token_count > 2048
    first, second = ledger(paths[0], 1)[0], ledger(paths[1], 1)[0]
    assert first["cache_writes"]["explicit"] > 2048 and not second["cache_writes"].get("explicit")
    assert any("created by another replica" in line for line in second["explanation"])
    # The creating request carries the cache's tokens at the input rate and its storage for its whole TTL.
    meta = answers[0].usage_metadata.model_dump()
    assert Decimal(first["cost_usd"]) == gemini_golden(meta, created=first["cache_writes"]["explicit"])


def test_an_expired_gateway_token_is_refreshed_once_and_the_request_billed_once(mock_server, tmp_path, monkeypatch):
    mock, ctx = mock_server
    monkeypatch.delenv("PREFIXGATE_VERTEX_ACCESS_TOKEN")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(service_account_file(tmp_path, f"{mock}/token")))
    settings = settings_for(mock, tmp_path, vertex_base_url=mock)
    with running_gateway(settings) as gw:
        client = claude_client(f"{gw.url}/v1")
        t = time.time()
        first = client.messages.create(**claude_args(t))
        # Vertex refuses the token the gateway holds (revoked, or expired early): one 401, then a fresh token.
        for token in ctx.vertex_tokens:
            ctx.vertex_tokens[token] = 0.0
        second = client.messages.with_raw_response.create(**claude_args(t + 1))
    assert first.content[0].text and second.parse().content[0].text
    records = ledger(settings.ledger_path, 2)
    assert len(records) == 2 and [r["status"] for r in records] == [200, 200] and records[1]["attempts"] == 1
    assert Decimal(records[1]["cost_usd"]) == claude_golden(second.parse().usage.model_dump())
    # The gateway's service account got a token, then exactly one fresh one after the 401.
    assert len(ctx.vertex_tokens) == 2


def test_claude_code_in_vertex_mode_through_the_gateway(tmp_path):
    from tests.cache_planner.test_claude_code import QUIET, claude_binary
    from tests.support_stack import running_stack

    claude = claude_binary()
    env = {"GOOGLE_CLOUD_PROJECT": PROJECT, "GOOGLE_CLOUD_LOCATION": LOCATION,
           "PREFIXGATE_VERTEX_ACCESS_TOKEN": STATIC_TOKEN, "PREFIXGATE_LEDGER_PATH": str(tmp_path / "ledger.sqlite")}
    with running_stack(tmp_path, env) as (gw, _):
        home, project = tmp_path / "home", tmp_path / "project"
        home.mkdir()
        project.mkdir()
        client_env = {"PATH": os.environ["PATH"], "HOME": str(home), "CLAUDE_CODE_USE_VERTEX": "1",
                      "ANTHROPIC_VERTEX_BASE_URL": f"{gw}/v1", "CLAUDE_CODE_SKIP_VERTEX_AUTH": "1",
                      "ANTHROPIC_VERTEX_PROJECT_ID": "caller-project", "CLOUD_ML_REGION": LOCATION,
                      "ANTHROPIC_MODEL": CLAUDE, "ANTHROPIC_SMALL_FAST_MODEL": CLAUDE, **QUIET}
        for i in range(2):
            done = subprocess.run([str(claude), "-p", f"Say hello, run {i}"], cwd=project, env=client_env,
                                  capture_output=True, text=True, timeout=180)
            assert done.returncode == 0 and "API Error" not in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    records = [r for r in read_records(str(tmp_path / "ledger.sqlite")) if r["status"] == 200]
    assert records and {r["dialect"] for r in records} == {"vertex_anthropic"}
    assert all(r["provider"] == "vertex" and r["cost_usd"] is not None for r in records)
    assert records[-1]["cache_read"] > 1024


def test_a_context_cache_lives_where_its_models_requests_go_with_a_second_vertex_upstream(mock, tmp_path):
    """A policy with a second Vertex upstream (Claude on the global endpoint) and Gemini on the built-in one: the
    cache google-genai creates is in the location Gemini's requests are sent to, so they can read it, and it can
    be fetched and deleted by the name the create answered with."""
    settings = settings_for(mock, tmp_path, vertex_base_url=mock)
    policy = policy_for(settings, {
        "upstreams": {"vertex-claude": {"kind": "vertex", "project": PROJECT, "location": "global", "url": mock}},
        "routes": [{"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "vertex-claude"}]},
                   {"name": "gemini", "models": ["*"], "targets": [{"upstream": "vertex"}]}]})
    with running_gateway(settings, policy=policy) as gw:
        client = genai_vertex_caller(gw.url)
        cache = client.caches.create(model=GEMINI, config=types.CreateCachedContentConfig(
            system_instruction=dated_system(0, dated=False), ttl="600s"))
        assert cache.name.startswith(f"projects/{PROJECT}/locations/{LOCATION}/cachedContents/")
        answer = client.models.generate_content(model=GEMINI, contents="Where is order 7?",
                                                config=types.GenerateContentConfig(cached_content=cache.name))
        assert answer.usage_metadata.cached_content_token_count == cache.usage_metadata.total_token_count
        assert client.caches.get(name=cache.name).name == cache.name
        client.caches.delete(name=cache.name)
