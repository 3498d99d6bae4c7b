"""The `vertex` upstream kind as policy data, routing of Vertex callers, and the Vertex wire formats' request
shapes: validated at the edge with the key at fault named, Vertex's paths going to Vertex with no policy,
Anthropic and Gemini bodies adopted untranslated, and cache creation naming the model as Vertex requires."""

from __future__ import annotations

import pytest

from prefixgate.config import Settings
from prefixgate.dialects import anthropic, gemini, vertex_anthropic, vertex_gemini
from prefixgate.errors import RequestError
from prefixgate.policies import Policy, PolicyError, Router, builtin_upstreams, load_policy

ROOT = "https://us-east5-aiplatform.googleapis.com/v1/projects/acme-prod/locations/us-east5"


@pytest.fixture(autouse=True)
def no_google_env(monkeypatch):
    for name in ("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "PREFIXGATE_VERTEX_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def policy(data: dict) -> Policy:
    return Policy.from_dict(data, builtin_upstreams(Settings()))


def vertex_route(**upstream) -> dict:
    return {"upstreams": {"v": {"kind": "vertex", **upstream}},
            "routes": [{"name": "r", "models": ["*"], "targets": [{"upstream": "v"}]}]}


def test_a_vertex_upstream_is_its_project_and_locations_resource_root():
    up = policy(vertex_route(project="acme-prod", location="us-east5")).upstreams["v"]
    assert up.url == ROOT and up.api_key_env == ("PREFIXGATE_VERTEX_ACCESS_TOKEN",) and up.price_rows == "vertex"
    glob = policy(vertex_route(project="acme-prod", location="global")).upstreams["v"]
    assert glob.url == "https://aiplatform.googleapis.com/v1/projects/acme-prod/locations/global"


def test_project_location_and_host_default_from_the_environment(monkeypatch):
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-proj")
    monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
    assert policy(vertex_route()).upstreams["v"].url.endswith("/v1/projects/env-proj/locations/europe-west4")
    monkeypatch.setenv("PREFIXGATE_VERTEX_BASE_URL", "http://127.0.0.1:8200")
    assert policy(vertex_route()).upstreams["v"].url == "http://127.0.0.1:8200/v1/projects/env-proj/locations/europe-west4"


@pytest.mark.parametrize(("spec", "message"), [
    ({"location": "us-east5"}, "upstreams.v.project: required for a vertex upstream (or set GOOGLE_CLOUD_PROJECT)"),
    ({"project": "p-1"}, "upstreams.v.location: required for a vertex upstream (or set GOOGLE_CLOUD_LOCATION)"),
    ({"project": "Acme/Prod", "location": "us-east5"}, "upstreams.v.project: a Google Cloud project id"),
    ({"project": "p-1", "location": "us east"}, "upstreams.v.location: a Google Cloud location id"),
    ({"project": "p-1", "location": "l-1", "region": "us-east-1"}, "upstreams.v.region: not a key of a vertex upstream"),
    ({"project": "p-1", "location": "l-1", "url": "ftp://x"}, "upstreams.v.url: an http(s) URL"),
    ({"project": "p-1", "location": "l-1", "api_key": "ya29.x"}, "upstreams.v.api_key: keys are not accepted"),
])
def test_bad_vertex_upstreams_name_the_key(spec, message):
    with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        policy(vertex_route(**spec))


def test_project_belongs_to_vertex_and_formats_to_known_wire_formats():
    with pytest.raises(PolicyError, match="upstreams.o: project and location are for kind vertex only"):
        policy({"upstreams": {"o": {"kind": "openai", "url": "http://x", "project": "p-1"}},
                "routes": [{"name": "r", "models": ["*"], "targets": [{"upstream": "o"}]}]})
    with pytest.raises(PolicyError, match=r"routes.0.formats: unknown wire formats \['vertex'\]"):
        policy({"routes": [{"name": "r", "models": ["*"], "formats": ["vertex"], "targets": [{"upstream": "openai"}]}]})


def test_without_a_policy_vertex_paths_go_to_vertex_and_other_callers_by_model(monkeypatch):
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "gw-proj")
    router = Router(load_policy(Settings(vertex_base_url="http://mock:1")))
    for dialect in ("vertex_anthropic", "vertex_gemini"):
        assert router.decide("claude-haiku-4-5@20251001", None, dialect).route.name == "vertex"
        assert router.decide("gemini-3.5-flash", None, dialect).route.name == "vertex"
    assert router.decide("claude-sonnet-4-6", None, "anthropic").route.name == "anthropic"
    assert router.decide("gemini-3.5-flash", None, "gemini").route.name == "gemini"
    up = load_policy(Settings(vertex_base_url="http://mock:1")).upstreams["vertex"]
    assert up.url == "http://mock:1/v1/projects/gw-proj/locations/global"


def test_without_a_project_the_builtin_upstream_says_what_to_set():
    up = builtin_upstreams(Settings())["vertex"]
    with pytest.raises(RequestError, match="set GOOGLE_CLOUD_PROJECT"):
        vertex_gemini.WIRE.upstream_url(up.url, "gemini-3.5-flash", stream=False)


def test_callers_go_out_in_the_vertex_format_that_carries_their_body():
    up = policy(vertex_route(project="p-1", location="us-east5")).upstreams["v"]
    assert up.dialect_for("anthropic") == up.dialect_for("vertex_anthropic") == "vertex_anthropic"
    assert up.dialect_for("gemini") == up.dialect_for("vertex_gemini") == "vertex_gemini"
    assert up.dialect_for("openai", "claude-haiku-4-5@20251001") == "vertex_anthropic"
    assert up.dialect_for("openai", "gemini-3.8-flash") == "vertex_gemini"
    assert up.own_credentials_only


def test_an_anthropic_request_adopted_for_rawpredict_keeps_its_markers_and_gains_the_version():
    body = {"model": "claude-haiku-4-5", "max_tokens": 32, "stream": True,
            "system": [{"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "messages": [{"role": "user", "content": "Hi"}]}
    conv = vertex_anthropic.WIRE.adopt(anthropic.parse_request(body), {})
    out = vertex_anthropic.WIRE.encode_request(vertex_anthropic.WIRE.billable(conv))
    assert out == {"anthropic_version": "vertex-2023-10-16", **{k: v for k, v in body.items() if k != "model"}}
    url = vertex_anthropic.WIRE.upstream_url(ROOT, "claude-haiku-4-5@20251001", stream=True)
    assert url == f"{ROOT}/publishers/anthropic/models/claude-haiku-4-5@20251001:streamRawPredict"


def test_a_rawpredict_body_naming_a_model_is_refused_and_a_missing_version_is_added():
    parse = vertex_anthropic.WIRE.parser_for(
        "/vertex_ai/v1/projects/c/locations/us-east5/publishers/anthropic/models/claude-haiku-4-5@20251001:rawPredict")
    with pytest.raises(RequestError, match="model: not allowed"):
        parse(b'{"model": "x", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}')
    conv = parse(b'{"max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}')
    assert conv.model == "claude-haiku-4-5@20251001" and not conv.stream
    assert vertex_anthropic.WIRE.encode_request(vertex_anthropic.WIRE.billable(conv))["anthropic_version"] == \
        "vertex-2023-10-16"
    assert vertex_anthropic.WIRE.parser_for(
        "/v1/projects/c/locations/l/publishers/anthropic/models/count-tokens:rawPredict") is None


def test_gemini_on_vertex_uses_v1beta1_and_creates_caches_with_the_full_model_name():
    body = {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
    conv = vertex_gemini.WIRE.adopt(gemini.parse_request(body, model="gemini-3.5-flash"), {})
    assert conv.dialect == "vertex_gemini" and vertex_gemini.WIRE.encode_request(conv) == body
    beta = ROOT.replace("/v1/", "/v1beta1/")
    assert vertex_gemini.WIRE.upstream_url(ROOT, "gemini-3.5-flash", stream=True) == \
        f"{beta}/publishers/google/models/gemini-3.5-flash:streamGenerateContent?alt=sse"
    assert vertex_gemini.WIRE.resource_url(ROOT, "/cachedContents") == f"{beta}/cachedContents"
    create = vertex_gemini.WIRE.explicit_cache_body(ROOT, {"model": "models/gemini-3.5-flash", "ttl": "3600s"})
    assert create == {"model": "projects/acme-prod/locations/us-east5/publishers/google/models/gemini-3.5-flash",
                      "ttl": "3600s"}
    err = vertex_gemini.WIRE.error_body(RequestError("nope", status=401, kind="authentication"))
    assert err == {"error": {"code": 401, "message": "nope", "status": "UNAUTHENTICATED"}}
