"""A Vertex caller may name its context cache by the short name `cachedContents/{id}`: google-genai expands it
with the client's own project and location (`projects/{caller}/locations/{l}/cachedContents/{id}`). The cache
lives in the gateway's upstream project, where the gateway created it, so the gateway names it there; Vertex (the
mock, like Google) answers a cache name under another project with a 404. The owner check is by the cache's id and
stays: another tenant naming the same id, under any project, is still a 404 that never reaches the upstream."""

from __future__ import annotations

import httpx
import pytest
from google import genai
from google.genai import errors, types
from google.oauth2.credentials import Credentials

from prefixgate.policies import hash_key
from tests.gateway.support_vertex import (
    GEMINI,
    LOCATION,
    dated_system,
    gateway_over_mock_vertex,
)

ACME, BETA = "pg-vertex-short-acme-0123", "pg-vertex-short-beta-0123"


@pytest.fixture
def gateway(monkeypatch, tmp_path):
    def policy(url: str) -> dict:
        return {
            "routes": [{"name": "gemini", "models": ["*"], "targets": [{"upstream": "vertex"}]}],
            "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme"},
                     {"name": "beta", "key_sha256": hash_key(BETA), "tenant": "beta"}]}

    with gateway_over_mock_vertex(monkeypatch, tmp_path, policy) as url:
        yield url


def client(url: str, key: str, project: str) -> genai.Client:
    return genai.Client(vertexai=True, project=project, location=LOCATION, credentials=Credentials(key),
                        http_options=types.HttpOptions(base_url=url))


def test_a_short_cache_name_reads_the_cache_the_gateway_created(gateway):
    acme = client(gateway, ACME, "acme-project")
    cache = acme.caches.create(model=GEMINI, config=types.CreateCachedContentConfig(
        system_instruction=dated_system(0, dated=False), ttl="600s"))
    short = "cachedContents/" + cache.name.rsplit("/", 1)[1]
    for ask in (acme.models.generate_content, acme.models.generate_content_stream):
        answers = ask(model=GEMINI, contents="Where is order 7?", config=types.GenerateContentConfig(cached_content=short))
        usage = [a.usage_metadata for a in ([answers] if ask == acme.models.generate_content else answers)][-1]
        assert usage.cached_content_token_count == cache.usage_metadata.total_token_count


def test_another_tenant_naming_the_id_under_its_own_project_is_not_found(gateway):
    acme = client(gateway, ACME, "acme-project")
    cache = acme.caches.create(model=GEMINI, config=types.CreateCachedContentConfig(
        system_instruction=dated_system(0, dated=False), ttl="600s"))
    ident = cache.name.rsplit("/", 1)[1]
    beta = client(gateway, BETA, "beta-project")
    for name in (f"cachedContents/{ident}", cache.name):
        with pytest.raises(errors.ClientError) as refused:
            beta.models.generate_content(model=GEMINI, contents="Where is order 7?",
                                         config=types.GenerateContentConfig(cached_content=name))
        assert refused.value.code == 404


def test_counting_tokens_with_a_cache_named_under_the_callers_project_counts_the_cache(gateway):
    acme = client(gateway, ACME, "acme-project")
    cache = acme.caches.create(model=GEMINI, config=types.CreateCachedContentConfig(
        system_instruction=dated_system(0, dated=False), ttl="600s"))
    mine = f"projects/acme-project/locations/{LOCATION}/cachedContents/{cache.name.rsplit('/', 1)[1]}"
    root = f"{gateway}/v1beta1/projects/acme-project/locations/{LOCATION}/publishers/google/models/{GEMINI}"
    question = [{"role": "user", "parts": [{"text": "Where is order 7?"}]}]
    counted = httpx.post(f"{root}:countTokens", headers={"authorization": f"Bearer {ACME}"},
                         json={"cachedContent": mine, "contents": question})
    assert counted.status_code == 200, counted.text
    assert counted.json()["totalTokens"] > cache.usage_metadata.total_token_count
