"""A Gemini explicit cache belongs to the project of the API key that created it (another key's request naming it
is refused). With a route sending a model to a Gemini upstream of its own (a team's key), a caller's
`caches.create` must go there too, and its follow-ups to where the cache lives; the built-in Gemini upstream holds
none of them."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import types

from prefixgate.policies import hash_key
from tests.gateway.support_gateway import gateway_over_mock

ACME = "pg-gemini-homes-acme-0123"
# over the 4,096-token minimum a Gemini 3.x Flash cache needs (ai.google.dev/gemini-api/docs/caching)
SYSTEM = "You answer from the shipping manual below.\n" + "Rule: parcels leave within two days. " * 600


@pytest.fixture
def gateway(monkeypatch, tmp_path):
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaBuiltinKey00000000000000000")
    monkeypatch.setenv("TEAM_GEMINI_KEY", "AIzaTeamKey000000000000000000000")
    with gateway_over_mock(tmp_path, lambda mock: {
            "upstreams": {"gemini-team": {"kind": "gemini", "url": mock, "api_key_env": "TEAM_GEMINI_KEY"}},
            "routes": [{"name": "team", "models": ["gemini-3.5-flash"], "targets": [{"upstream": "gemini-team"}]}],
            "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme"}]}) as gw:
        yield gw.url


def test_a_cache_is_created_read_and_used_on_the_routes_own_gemini_upstream(gateway):
    client = genai.Client(api_key=ACME, http_options=types.HttpOptions(base_url=gateway, api_version="v1beta"))
    cache = client.caches.create(model="gemini-3.5-flash", config=types.CreateCachedContentConfig(
        system_instruction=SYSTEM, ttl="600s"))
    assert client.caches.get(name=cache.name).name == cache.name
    answer = client.models.generate_content(model="gemini-3.5-flash", contents="When does my parcel leave?",
                                            config=types.GenerateContentConfig(cached_content=cache.name))
    assert answer.usage_metadata.cached_content_token_count == cache.usage_metadata.total_token_count
    client.caches.delete(name=cache.name)
