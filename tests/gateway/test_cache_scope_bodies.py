"""cachedContents bodies, the caller's and Google's: a caller's PATCH refused for its body (not JSON, a key written
twice, a field spelt both ways, a lifetime past `max_cache_ttl_s`) is a 400 that does not count toward the key's
requests per minute, as a model request refused for its body does not; and Google's own answer is read as an
upstream's answer: one that is not JSON is a 502 (the upstream's fault), never the 400 that says the caller's request
body is bad. Through a real gateway in front of the mock providers (Gemini's create and PATCH) and, for answers
no provider sends, a stand-in upstream."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from prefixgate.policies import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.gateway.support_vertex import gateway_over_mock_vertex
from tests.support_services import ServerThread

FLASH = "gemini-3.5-flash"
KEY = "pg-cachescope-bodies-0001"
HEADERS = {"x-goog-api-key": KEY, "content-type": "application/json"}
CACHE = {"model": f"models/{FLASH}", "ttl": "600s",
         "contents": [{"role": "user", "parts": [{"text": "The Lisbon warehouse's dock rules. " * 700}]}]}
RPM = 3


def _policy(settings) -> dict:
    return policy_for(settings, {
        "routes": [{"name": "flash", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
        "keys": [{"name": "acme", "key_sha256": hash_key(KEY), "tenant": "acme",
                  "rate_limit": {"requests_per_minute": RPM}}]})


@pytest.fixture
def gateway(tmp_path, monkeypatch) -> Iterator[str]:
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaSecretGeminiKey000000000000555")
    with ServerThread(mock_app(MockContext()), log_level="critical") as mock:
        settings = settings_for(mock.url, tmp_path)
        with running_gateway(settings, policy=_policy(settings)) as gw:
            yield gw.url


@pytest.mark.parametrize("bad", [
    b'{"ttl": "60s", "ttl": "120s"}',                                   # a key written twice
    b'{"ttl": ',                                                        # not JSON
    b'{"expireTime": "2030-01-01T00:00:00Z", "expire_time": "2030-01-02T00:00:00Z"}',    # both spellings
    b'{"ttl": "315360000s"}',                                           # ten years: past max_cache_ttl_s
    b'{"ttl": "60s", "expireTime": "2030-01-01T00:00:00Z"}',            # two fields of one oneof
])
def test_a_patch_refused_for_its_body_does_not_count_toward_the_rate_limit(gateway: str, bad: bytes) -> None:
    created = httpx.post(f"{gateway}/v1beta/cachedContents", json=CACHE, headers=HEADERS)
    assert created.status_code == 200, created.text
    name = created.json()["name"]
    # One request of the key's minute spent on the create; as many refused extensions as the limit allows.
    for _ in range(RPM):
        refused = httpx.patch(f"{gateway}/v1beta/{name}", content=bad, headers=HEADERS)
        assert refused.status_code == 400 and refused.json()["error"]["status"] == "INVALID_ARGUMENT", refused.text
    extended = httpx.patch(f"{gateway}/v1beta/{name}", json={"ttl": "1200s"}, headers=HEADERS)
    assert extended.status_code == 200, extended.text


def _unreadable(answer: bytes):
    async def cached(request: Request) -> Response:
        return Response(answer, 200, media_type="application/json")
    return Starlette(routes=[Route("/v1beta/cachedContents", cached, methods=["GET", "POST"]),
                             Route("/v1beta/cachedContents/{name}", cached, methods=["GET", "PATCH", "DELETE"])])


@pytest.mark.parametrize("answer", [b"<html>upstream proxy error</html>", b'["not", "an", "object"]'])
def test_an_answer_that_is_not_a_json_object_is_a_502(tmp_path, monkeypatch, answer: bytes) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaSecretGeminiKey000000000000555")
    with ServerThread(_unreadable(answer), log_level="critical") as upstream:
        settings = settings_for(upstream.url, tmp_path)
        with running_gateway(settings, policy=_policy(settings)) as gw:
            listed = httpx.get(f"{gw.url}/v1beta/cachedContents", headers=HEADERS)
    assert listed.status_code == 502 and listed.json()["error"]["status"] != "INVALID_ARGUMENT", listed.text


VERTEX_CACHES = "/v1/projects/caller-project/locations/us-east5/cachedContents"


@pytest.mark.parametrize("vertex", [False, True])
def test_a_create_setting_ttl_and_expire_time_is_refused_before_admission(tmp_path, monkeypatch, vertex: bool) -> None:
    # ttl and expireTime are one protobuf oneof (`expiration`), which Google's JSON parser refuses to see set twice.
    # The gateway read ttl first and sent the body on: each such create counted toward the key's requests per minute.
    monkeypatch.setenv("GEMINI_API_KEY", "AIzaSecretGeminiKey000000000000555")
    upstream = "vertex" if vertex else "gemini"
    routes = {"routes": [{"name": "flash", "models": ["gemini-*"], "targets": [{"upstream": upstream}]}],
              "keys": [{"name": "acme", "key_sha256": hash_key(KEY), "tenant": "acme",
                        "rate_limit": {"requests_per_minute": RPM}}]}
    model = f"projects/caller-project/locations/us-east5/publishers/google/models/{FLASH}" if vertex else CACHE["model"]
    url, headers = (VERTEX_CACHES, {"authorization": f"Bearer {KEY}"}) if vertex else ("/v1beta/cachedContents", HEADERS)
    both = {**CACHE, "model": model, "expireTime": "2030-01-01T00:00:00Z"}
    with gateway_over_mock_vertex(monkeypatch, tmp_path, lambda _: routes) as gw:
        for _ in range(RPM):
            refused = httpx.post(gw + url, json=both, headers=headers)
            error = refused.json()["error"]
            assert refused.status_code == 400 and error["status"] == "INVALID_ARGUMENT", refused.text
            assert "'ttl'" in error["message"] and "'expireTime'" in error["message"], error
        made = httpx.post(gw + url, json={**CACHE, "model": model}, headers=headers)
    assert made.status_code == 200, made.text
