"""A route balancing one Gemini model over two Vertex regions: a request naming an explicit cache can be answered
only in the region holding it (Vertex keeps caches per project and location), so it goes to the cache's home
whichever replica its prompt would otherwise pick."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

from prefixgate.policies import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.gateway.support_vertex import GEMINI, LOCATION, PROJECT, dated_system, use_mock_vertex
from tests.support_services import ServerThread

ACME = "pg-vertex-home-req-acme-0123"


@pytest.fixture
def gateway(monkeypatch, tmp_path):
    use_mock_vertex(monkeypatch)
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path, vertex_base_url=mock.url)
        policy = policy_for(settings, {
            "upstreams": {"vertex-us": {"kind": "vertex", "project": PROJECT, "location": LOCATION, "url": mock.url},
                          "vertex-eu": {"kind": "vertex", "project": PROJECT, "location": "europe-west4", "url": mock.url}},
            "routes": [{"name": "flash", "models": ["*"], "targets": [{"replicas": ["vertex-us", "vertex-eu"]}]}],
            "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme"}]})
        with running_gateway(settings, policy=policy) as gw:
            yield gw.url


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
