"""A route balancing one Gemini model over two Vertex regions: a request naming an explicit cache can be answered
only in the region holding it (Vertex keeps caches per project and location), so it goes to the cache's home
whichever replica its prompt would otherwise pick."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

from prefixgate.policies import hash_key
from tests.gateway.support_vertex import (
    GEMINI,
    LOCATION,
    PROJECT,
    dated_system,
    gateway_over_mock_vertex,
)

ACME = "pg-vertex-home-req-acme-0123"


@pytest.fixture
def gateway(monkeypatch, tmp_path):
    def policy(url: str) -> dict:
        return {
            "upstreams": {"vertex-us": {"kind": "vertex", "project": PROJECT, "location": LOCATION, "url": url},
                          "vertex-eu": {"kind": "vertex", "project": PROJECT, "location": "europe-west4", "url": url}},
            "routes": [{"name": "flash", "models": ["*"], "targets": [{"replicas": ["vertex-us", "vertex-eu"]}]}],
            "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme"}]}

    with gateway_over_mock_vertex(monkeypatch, tmp_path, policy) as url:
        yield url


def test_requests_naming_a_cache_reach_the_region_that_holds_it(gateway):
    acme = genai.Client(vertexai=True, project="acme-project", location=LOCATION, credentials=Credentials(ACME),
                        http_options=types.HttpOptions(base_url=gateway))
    cache = acme.caches.create(model=GEMINI, config=types.CreateCachedContentConfig(
        system_instruction=dated_system(0, dated=False), ttl="600s"))
    short = "cachedContents/" + cache.name.rsplit("/", 1)[1]
    # Prompts that differ from their first words: left to themselves they would spread over both regions.
    for order in range(12):
        answer = acme.models.generate_content(model=GEMINI, contents=f"Order {order}: where is it?",
                                              config=types.GenerateContentConfig(cached_content=short))
        assert answer.usage_metadata.cached_content_token_count == cache.usage_metadata.total_token_count
