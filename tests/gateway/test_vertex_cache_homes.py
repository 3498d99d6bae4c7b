"""With several Vertex upstreams (a project's regions), a cache lives where its create went, and Vertex keeps caches
per location: a get, update or delete naming it by its short name (google-genai expands `cachedContents/{id}` with
the client's own project) must reach that upstream, never the first Vertex upstream of the policy."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import errors, types
from google.oauth2.credentials import Credentials

from prefixgate.policies import hash_key
from tests.gateway.support_vertex import (
    GEMINI,
    LOCATION,
    PROJECT,
    dated_system,
    gateway_over_mock_vertex,
)

ACME = "pg-vertex-homes-acme-0123"


@pytest.fixture
def gateway(monkeypatch, tmp_path):
    def policy(url: str) -> dict:
        return {
            # Europe first: the upstream a call that does not know the cache's home would go to.
            "upstreams": {"vertex-eu": {"kind": "vertex", "project": PROJECT, "location": "europe-west4", "url": url},
                          "vertex-us": {"kind": "vertex", "project": PROJECT, "location": LOCATION, "url": url}},
            "routes": [{"name": "flash", "models": [GEMINI], "targets": [{"upstream": "vertex-us"}]},
                       {"name": "rest", "models": ["*"], "targets": [{"upstream": "vertex-eu"}]}],
            "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme"}]}

    with gateway_over_mock_vertex(monkeypatch, tmp_path, policy) as url:
        yield url


def test_a_cache_named_by_its_short_name_is_read_updated_and_deleted_where_it_lives(gateway):
    acme = genai.Client(vertexai=True, project="acme-project", location=LOCATION, credentials=Credentials(ACME),
                        http_options=types.HttpOptions(base_url=gateway))
    cache = acme.caches.create(model=GEMINI, config=types.CreateCachedContentConfig(
        system_instruction=dated_system(0, dated=False), ttl="600s"))
    assert cache.name.startswith(f"projects/{PROJECT}/locations/{LOCATION}/cachedContents/")
    short = "cachedContents/" + cache.name.rsplit("/", 1)[1]
    # A list under the client's own project and location: the caches of the upstream in that location.
    assert [c.name for c in acme.caches.list()] == [cache.name]
    assert acme.caches.get(name=short).usage_metadata.total_token_count == cache.usage_metadata.total_token_count
    updated = acme.caches.update(name=short, config=types.UpdateCachedContentConfig(ttl="1200s"))
    assert updated.expire_time > cache.expire_time
    acme.caches.delete(name=short)
    with pytest.raises(errors.ClientError) as gone:
        acme.caches.get(name=short)
    assert gone.value.code == 404
