"""The real AnthropicVertex, google-genai (vertexai=True) and google-auth clients against mock-providers' Vertex
AI paths: Claude's rawPredict with Anthropic's cache, Gemini with Vertex's cachedContents, and Google's OAuth2
tokens (issued, expired, unknown)."""

from __future__ import annotations

import json
import uuid
from decimal import Decimal

import anthropic
import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google import genai
from google.auth.transport.requests import Request as AuthRequest
from google.genai import errors as genai_errors
from google.genai import types
from google.oauth2 import service_account
from google.oauth2.credentials import Credentials

from prefixgate.providers.pricing import cost_of, storage_cost
from prefixgate.providers.vertex_prices import price_name
from prefixgate.tokens import count_tokens
from prefixgate.usage import Usage
from tests.core.providers.support_prompts import text_of

pytestmark = pytest.mark.slow
TOKEN = "mock-vertex-token"
LOCATION = "us-east5"
CLAUDE = "claude-haiku-4-5@20251001"        # a dated Vertex id (newer models have none)
GEMINI = "gemini-3.5-flash"
MTOK = Decimal(1_000_000)


@pytest.fixture(autouse=True)
def static_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFIXGATE_MOCK_VERTEX_TOKEN", raising=False)
    monkeypatch.delenv("PREFIXGATE_MOCK_VERTEX_TOKEN_LIFETIME", raising=False)


def project() -> str:
    """A fresh project per test: caches are per project, so each test starts cold."""
    return f"proj-{uuid.uuid4().hex[:8]}"


def claude(url: str, proj: str, token: str = TOKEN) -> anthropic.AnthropicVertex:
    return anthropic.AnthropicVertex(base_url=url + "/v1", region=LOCATION, project_id=proj, access_token=token,
                                     max_retries=0)


def gemini(url: str, proj: str, token: str = TOKEN) -> genai.Client:
    return genai.Client(vertexai=True, project=proj, location=LOCATION, credentials=Credentials(token),
                        http_options=types.HttpOptions(base_url=url))


def test_anthropic_vertex_writes_then_reads_the_cache_and_streams(mock_server):
    url, _ = mock_server
    client, system = claude(url, project()), text_of(5000)
    args = {"model": CLAUDE, "max_tokens": 30, "messages": [{"role": "user", "content": "Why?"}],
            "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]}
    first = client.messages.create(**args)
    assert first.usage.cache_creation_input_tokens > 4000 and first.usage.cache_read_input_tokens == 0
    second = client.messages.create(**args)
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    with client.messages.stream(**args) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == second.content[0].text and final.usage.cache_read_input_tokens > 4000
    # Priced as Vertex bills it: Haiku 4.5 lists at $1 input, $0.10 cache read, $5 output per MTok, and a regional
    # endpoint costs 10% more than the global one from Sonnet 4.5 on (docs.claude.com/en/api/claude-on-vertex-ai).
    usage = Usage(uncached_input=second.usage.input_tokens, cache_read=second.usage.cache_read_input_tokens,
                  output=second.usage.output_tokens)
    listed = (usage.uncached_input * Decimal("1") + usage.cache_read * Decimal("0.10") + usage.output * Decimal("5")) / MTOK
    assert cost_of("vertex", price_name(CLAUDE, "global"), usage).total == listed
    assert cost_of("vertex", price_name(CLAUDE, LOCATION), usage).total == listed * Decimal("1.1")


def test_claude_on_vertex_wants_its_anthropic_version_and_no_model_in_the_body(mock_server):
    url, _ = mock_server
    path = f"{url}/v1/projects/{project()}/locations/{LOCATION}/publishers/anthropic/models/{CLAUDE}:rawPredict"
    body = {"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    headers = {"authorization": f"Bearer {TOKEN}"}
    missing = httpx.post(path, json=body, headers=headers)
    assert missing.status_code == 400 and missing.json()["error"]["type"] == "invalid_request_error"
    assert "vertex-2023-10-16" in missing.json()["error"]["message"]
    named = httpx.post(path, json={**body, "anthropic_version": "vertex-2023-10-16", "model": CLAUDE}, headers=headers)
    assert named.status_code == 400 and "model" in named.json()["error"]["message"]


def test_anthropic_vertex_counts_tokens_for_a_versioned_model(mock_server):
    """Vertex names a dated Claude `claude-haiku-4-5@20251001`, and AnthropicVertex's count_tokens sends that name in the
    body of `count-tokens:rawPredict`: it counts, as it does for the same model unversioned."""
    url, _ = mock_server
    client = claude(url, project())
    messages = [{"role": "user", "content": "Where is order 7?"}]
    versioned = client.messages.count_tokens(model=CLAUDE, messages=messages).input_tokens
    assert versioned > 0
    assert versioned == client.messages.count_tokens(model="claude-haiku-4-5", messages=messages).input_tokens


def test_genai_vertex_generates_streams_and_uses_a_context_cache(mock_server):
    url, ctx = mock_server
    proj = project()
    client, system = gemini(url, proj), text_of(5000)
    config = types.GenerateContentConfig(system_instruction=system, max_output_tokens=96)  # thinking counts in it
    first = client.models.generate_content(model=GEMINI, contents="Why?", config=config)
    assert first.text and first.usage_metadata.prompt_token_count > 5000
    streamed = "".join(c.text or "" for c in client.models.generate_content_stream(model=GEMINI, contents="Why?",
                                                                                  config=config))
    assert streamed == first.text
    cache = client.caches.create(model=GEMINI, config=types.CreateCachedContentConfig(
        system_instruction=system, ttl="3600s"))
    assert cache.name.startswith(f"projects/{proj}/locations/{LOCATION}/cachedContents/")
    assert cache.model == f"projects/{proj}/locations/{LOCATION}/publishers/google/models/{GEMINI}"
    used = client.models.generate_content(model=GEMINI, contents="Why?", config=types.GenerateContentConfig(
        cached_content=cache.name, max_output_tokens=20))
    assert used.usage_metadata.cached_content_token_count == cache.usage_metadata.total_token_count
    assert client.caches.get(name=cache.name).name == cache.name
    client.caches.delete(name=cache.name)
    with pytest.raises(genai_errors.ClientError):
        client.caches.get(name=cache.name)
    # Storage is billed from creation to deletion, per token-hour: the mock's bill and the price rows agree.
    bill = next(c for c in httpx.get(url + "/_mock/vertex/cachedContents").json()["cachedContents"]
                if c["name"] == cache.name)
    assert bill["deleted"] and Decimal(bill["tokenHours"]) > 0
    storage = storage_cost("vertex", price_name(GEMINI, LOCATION), Decimal(bill["tokenHours"])).storage
    assert storage == Decimal(bill["tokenHours"]) * Decimal("1.00") / 1_000_000


def test_a_vertex_cache_wants_the_full_model_name(mock_server):
    url, _ = mock_server
    proj = project()
    answer = httpx.post(f"{url}/v1beta1/projects/{proj}/locations/{LOCATION}/cachedContents",
                        headers={"authorization": f"Bearer {TOKEN}"},
                        json={"model": f"models/{GEMINI}", "systemInstruction": {"parts": [{"text": text_of(5000)}]}})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "vertex caches only support model name start with projects"


def service_account_file(folder, token_uri: str):  # noqa: ANN001, ANN201
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    path = folder / "sa.json"
    path.write_text(json.dumps({"type": "service_account", "project_id": "p", "private_key_id": "k1",
                                "private_key": key, "client_email": "gw@p.iam.gserviceaccount.com",
                                "client_id": "1", "token_uri": token_uri}))
    return path


def test_service_account_tokens_work_until_they_expire(mock_server, tmp_path, monkeypatch):
    url, ctx = mock_server
    monkeypatch.setenv("PREFIXGATE_MOCK_VERTEX_TOKEN_LIFETIME", "60")
    credentials = service_account.Credentials.from_service_account_file(
        str(service_account_file(tmp_path, url + "/token")), scopes=["https://www.googleapis.com/auth/cloud-platform"])
    credentials.refresh(AuthRequest())
    assert credentials.token.startswith("ya29.mock-")
    proj = project()
    reply = claude(url, proj, credentials.token).messages.create(
        model=CLAUDE, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert reply.usage.output_tokens >= 1
    ctx.vertex_tokens[credentials.token] = 0.0      # its hour is up
    for token in (credentials.token, "ya29.never-issued"):
        refused_client = claude(url, proj, token)
        with pytest.raises(anthropic.AuthenticationError) as caught:
            refused_client.messages.create(model=CLAUDE, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        assert caught.value.body["error"]["status"] == "UNAUTHENTICATED"
    refused_gemini = gemini(url, proj, "ya29.never-issued")
    with pytest.raises(genai_errors.ClientError) as refused:
        refused_gemini.models.generate_content(model=GEMINI, contents="hi")
    assert refused.value.code == 401


def test_a_fault_rule_names_vertex(mock_server):
    url, _ = mock_server
    with pytest.raises(anthropic.RateLimitError):
        claude(url, project()).messages.create(model=CLAUDE, max_tokens=5, messages=[{"role": "user", "content": "hi"}],
                                               extra_headers={"x-mock-fault": "status=429;retry_after=1"})
    assert count_tokens("hi") == 1
