"""Model names are data, never paths; credentials go only where they belong. Every format that builds an upstream
URL from a model name (Gemini, Vertex's Gemini and Claude, Bedrock's InvokeModel and Converse, Azure's
deployments) is fuzzed with model names and caller paths against a recording upstream: no request reaches a path,
project, method or query other than the route's own. A caller's own key reaches only the provider that issued it;
signing credentials echoed by an upstream are scrubbed from the answer, the ledger and /api/requests; a stored
response's query is allow-listed."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from prefixgate.dialects import anthropic as an
from prefixgate.dialects import gemini as ge
from prefixgate.dialects import openai as oa
from prefixgate.ledger import read_records
from prefixgate.usage import Usage
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread

USAGE = Usage(uncached_input=12, output=3)
PROJECT, LOCATION = "gw-project", "us-east5"
SCOPE = f"/v1/projects/{PROJECT}/locations/{LOCATION}"
# Each format's own upstream paths, for a model id as providers spell them (a safe segment; Bedrock's quoted whole).
SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._@-]*"
ROUTE_OWN = {
    "gemini": re.compile(rf"/v1beta/models/{SEGMENT}:generateContent"),
    "vertex": re.compile(rf"/v1(beta1)?/projects/{PROJECT}/locations/{LOCATION}/publishers/(google/models/{SEGMENT}:generateContent|anthropic/models/{SEGMENT}:rawPredict)"),
    "bedrock": re.compile(r"/model/[A-Za-z0-9._@%-]+/(invoke|converse)"),
    "azure": re.compile(rf"/openai/deployments/{SEGMENT}/chat/completions"),
}
QUERY_OWN = {"gemini": {""}, "vertex": {""}, "bedrock": {""}, "azure": {"api-version=2024-10-21"}}


@dataclass
class Seen:
    method: str
    raw_path: str
    query: str
    headers: dict[str, str]


class Recorder:
    """Answers every path like the provider that owns it, and records the raw path, query and headers; a request
    whose body says `"echo": true` gets a 403 that echoes its Authorization header back, as AWS's
    signature errors do."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        raw = await request.body()
        path = scope["raw_path"].decode()
        self.seen.append(Seen(request.method, path, scope["query_string"].decode(), dict(request.headers)))
        body = json.loads(raw) if raw else {}
        if isinstance(body, dict) and body.get("metadata", {}).get("echo"):
            answer: Response = JSONResponse({"message": f"The request signature is invalid: "
                                                        f"{request.headers.get('authorization')}"}, 403)
        elif path.endswith(":generateContent"):
            answer = JSONResponse(ge.build_response("m", "ok", USAGE))
        elif path.endswith(("rawPredict", "/invoke")):
            answer = JSONResponse(an.build_response("m", "ok", USAGE))
        elif path.endswith("/converse"):
            answer = JSONResponse({"output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
                                   "stopReason": "end_turn", "usage": {"inputTokens": 12, "outputTokens": 3,
                                                                       "totalTokens": 15}, "metrics": {"latencyMs": 1}})
        elif path == "/v1/chat/completions" and body.get("model") == "gpt-failover":
            answer = JSONResponse({"error": {"message": "overloaded", "type": "server_error"}}, 503)
        elif path.endswith("/chat/completions"):
            answer = JSONResponse(oa.build_response("m", "ok", USAGE))
        else:
            answer = JSONResponse({"id": "resp_1", "object": "response"})
        await answer(scope, receive, send)


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[tuple[Recorder, str, str]]:
    """(recorder, gateway URL, ledger path): one open gateway whose every upstream is the recorder."""
    mp = pytest.MonkeyPatch()
    for name, value in {"AWS_ACCESS_KEY_ID": "AKIAGATEWAYURLS00001", "AWS_SECRET_ACCESS_KEY": "gateway/urls+secret",
                        "AWS_REGION": "us-east-1", "PREFIXGATE_VERTEX_ACCESS_TOKEN": "ya29.gateway-static-token-0001",
                        "GEMINI_API_KEY": "AIzaGatewayUrls000000000000000000000",
                        "PG_TEST_AZURE_KEY": "azure-gateway-key-0005"}.items():
        mp.setenv(name, value)
    for name in ("AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE", "OPENAI_API_KEY", "DEEPSEEK_API_KEY",
                 "AZURE_OPENAI_API_KEY", "PG_TEST_UNSET_KEY"):
        mp.delenv(name, raising=False)
    recorder = Recorder()
    try:
        with ServerThread(recorder) as up:
            tmp = tmp_path_factory.mktemp("urls")
            settings = settings_for(up.url, tmp, bedrock_base_url=up.url)
            # Every route matches any name (`**`), so what stops a hostile name is the URL check, not routing.
            policy = policy_for(settings, {
                "upstreams": {
                    "vertex": {"kind": "vertex", "url": up.url, "project": PROJECT, "location": LOCATION},
                    "azure": {"kind": "openai_compatible", "provider": "azure", "url": up.url,
                              "api_version": "2024-10-21", "api_key_env": "PG_TEST_AZURE_KEY"},
                    "azure-unkeyed": {"kind": "openai_compatible", "provider": "azure", "url": up.url,
                                      "api_version": "2024-10-21", "api_key_env": "PG_TEST_UNSET_KEY"},
                    "deepseek": {"kind": "openai_compatible", "provider": "deepseek", "url": up.url + "/deepseek/v1",
                                 "api_key_env": "PG_TEST_DEEPSEEK_KEY"}},
                "routes": [
                    {"name": "vertex", "models": ["**"], "formats": ["vertex_gemini", "vertex_anthropic"],
                     "targets": [{"upstream": "vertex"}]},
                    {"name": "bedrock", "models": ["**"], "formats": ["bedrock_invoke", "bedrock_converse"],
                     "targets": [{"upstream": "bedrock"}]},
                    {"name": "gemini", "models": ["**"], "formats": ["gemini"], "targets": [{"upstream": "gemini"}]},
                    {"name": "via-vertex", "models": ["vx/**", "vx-**"], "targets": [{"upstream": "vertex"}]},
                    {"name": "via-azure", "models": ["az-**"], "targets": [{"upstream": "azure"}]},
                    {"name": "via-unkeyed-azure", "models": ["azn-**"], "targets": [{"upstream": "azure-unkeyed"}]},
                    {"name": "failover", "models": ["gpt-failover"], "retry": {"attempts": 1},
                     "targets": [{"upstream": "openai"}, {"upstream": "deepseek"}]},
                    {"name": "chat", "models": ["**"], "targets": [{"upstream": "gemini"}]}]})
            with running_gateway(settings, policy=policy) as gw:
                yield recorder, gw.url, settings.ledger_path
    finally:
        mp.undo()


CHAT = {"messages": [{"role": "user", "content": "Where is my parcel?"}], "max_tokens": 20}
GEMINI_BODY = {"contents": [{"role": "user", "parts": [{"text": "Where is my parcel?"}]}]}
CLAUDE_BODY = {"anthropic_version": "vertex-2023-10-16", "max_tokens": 20,
               "messages": [{"role": "user", "content": "Where is my parcel?"}]}


def requests_for(model: str) -> list[tuple[str, str, dict]]:
    """(format, caller path, body) for each way a caller's model name reaches an upstream URL: in the caller's
    own path (quoted once, as an SDK does: the gateway decodes it once) or in a chat body routed onward."""
    once = quote(model, safe="")
    return [
        ("gemini", f"/v1beta/models/{once}:generateContent", GEMINI_BODY),
        ("gemini", "/v1/chat/completions", {**CHAT, "model": model}),
        ("vertex", f"{SCOPE}/publishers/google/models/{once}:generateContent", GEMINI_BODY),
        ("vertex", f"{SCOPE}/publishers/anthropic/models/{once}:rawPredict", CLAUDE_BODY),
        ("vertex", "/v1/chat/completions", {**CHAT, "model": f"vx-{model}"}),
        ("bedrock", f"/model/{once}/invoke", {**CLAUDE_BODY, "anthropic_version": "bedrock-2023-05-31"}),
        ("bedrock", f"/model/{once}/converse", {"messages": [{"role": "user", "content": [{"text": "Hi"}]}]}),
        ("azure", "/v1/chat/completions", {**CHAT, "model": f"az-{model}"}),
    ]


HOSTILE = ["gemini-3.5-flash-lite/../gemini-3.8-flash:generateContent#", "gemini-3.5-flash%3FgenerateContent",
           "gemini-3.5-flash:streamGenerateContent?alt=sse&key=x", "..", "../../projects/other-proj/locations/x",
           "m%252F..%252Fprojects%252Fother-proj", "gemini-3.5-flash#frag", "a/b", "m?upload_protocol=raw",
           "claude-haiku-4-5@20251001:streamRawPredict", "%2e%2e", "m\\..\\x", "m;x=1"]
NAMES = st.one_of(st.sampled_from(HOSTILE),
                  st.text(alphabet="ab9.-_@:/?#%&=;\\ 2Ffe", min_size=1, max_size=24),
                  st.sampled_from(["gemini-3.5-flash", "claude-haiku-4-5@20251001", "anthropic.claude-haiku-4-5-v1:0"]))


def check(recorder: Recorder, url: str, model: str) -> None:
    for fmt, path, body in requests_for(model):
        before = len(recorder.seen)
        answer = httpx.post(url + path, json=body, timeout=30)
        assert answer.status_code < 500, (fmt, path, answer.status_code, answer.text)
        for seen in recorder.seen[before:]:
            assert ROUTE_OWN[fmt].fullmatch(seen.raw_path), (fmt, model, seen.raw_path)
            assert seen.query in QUERY_OWN[fmt], (fmt, model, seen.query)
            assert PROJECT in seen.raw_path or fmt != "vertex"
        if answer.status_code == 400 and len(recorder.seen) == before:
            assert "model" in answer.text       # refused in the caller's own shape, naming the field


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=NAMES)
def test_no_model_name_reaches_another_path_project_method_or_query(stack, model):
    recorder, url, _ = stack
    check(recorder, url, model)


@pytest.mark.parametrize("model", HOSTILE)
def test_the_reported_hostile_names_are_refused_with_a_400(stack, model):
    recorder, url, _ = stack
    before = len(recorder.seen)
    answer = httpx.post(url + "/v1/chat/completions", json={**CHAT, "model": model}, timeout=30)
    assert answer.status_code in (400, 404), answer.text
    assert answer.json()["error"]["type"] in ("invalid_request_error", "not_found_error")
    assert len(recorder.seen) == before


def test_safe_names_still_reach_their_own_paths(stack):
    recorder, url, _ = stack
    for fmt, path, body in requests_for("gemini-3.5-flash"):
        before = len(recorder.seen)
        answer = httpx.post(url + path, json=body, timeout=30)
        if fmt == "bedrock" or path.startswith(f"{SCOPE}/publishers/anthropic"):
            continue        # a Gemini name on Claude's and Bedrock's paths: whatever they answer, checked above
        assert answer.status_code == 200, (fmt, path, answer.text)
        assert len(recorder.seen) == before + 1


def test_route_patterns_do_not_match_across_a_slash():
    from prefixgate.policies.router import pattern_regex

    assert pattern_regex("gemini-*").fullmatch("gemini-3.5-flash")
    assert not pattern_regex("gemini-*").fullmatch("gemini-3.5-flash-lite/../gemini-3.8-flash")
    assert pattern_regex("**").fullmatch("Qwen/Qwen2.5-0.5B") and pattern_regex("anthropic/*").fullmatch("anthropic/x")


def test_a_callers_own_key_never_reaches_a_compatible_provider_or_azure(stack):
    recorder, url, _ = stack
    caller = {"authorization": "Bearer sk-caller-own-openai-key-0003"}
    before = len(recorder.seen)
    # The gateway holds no OpenAI key, so the caller's goes to OpenAI, which is down (503): the failover target,
    # DeepSeek, did not issue that key and must not be sent it.
    answer = httpx.post(url + "/v1/chat/completions", json={**CHAT, "model": "gpt-failover"}, headers=caller, timeout=30)
    assert answer.status_code >= 400
    assert [(s.raw_path, s.headers.get("authorization")) for s in recorder.seen[before:]] == \
        [("/v1/chat/completions", caller["authorization"])]
    # Nor Azure (its `api-key` header): an Azure resource's keys are not OpenAI's.
    answer = httpx.post(url + "/v1/chat/completions", json={**CHAT, "model": "azn-gpt-5.4"}, headers=caller, timeout=30)
    # The gateway's set-up, not the caller's key: never a 401 its SDK would blame on the caller's key, nor retried.
    assert answer.status_code == 501 and "no credentials for upstream 'azure-unkeyed'" in answer.text
    assert answer.headers["x-should-retry"] == "false"
    assert len(recorder.seen) == before + 1
    assert "sk-caller-own-openai-key-0003" not in answer.text


def test_echoed_signing_credentials_are_scrubbed_everywhere(stack):
    recorder, url, ledger = stack
    body = {**CLAUDE_BODY, "anthropic_version": "bedrock-2023-05-31", "metadata": {"echo": True}}
    answer = httpx.post(url + "/model/anthropic.claude-haiku-4-5-v1:0/invoke", json=body, timeout=30)
    assert answer.status_code == 403 and "The request signature is invalid" in answer.text
    signed = recorder.seen[-1].headers["authorization"]
    assert "AKIAGATEWAYURLS00001" in signed             # the recorder did get the gateway's access key id
    deadline = time.monotonic() + 10
    while not (rows := [r for r in read_records(ledger) if r["status"] == 403]) and time.monotonic() < deadline:
        time.sleep(0.05)
    listed = httpx.get(url + "/api/requests").text
    signature = signed.rsplit("Signature=", 1)[1]
    for text in (answer.text, json.dumps(rows), listed):
        assert "AKIAGATEWAYURLS00001" not in text and signature not in text
    assert rows and "***" in rows[-1]["error"]


def test_a_stored_response_query_is_allow_listed(stack):
    recorder, url, _ = stack
    httpx.get(url + "/v1/responses/resp_1/input_items?limit=2&order=asc&key=pg-gateway-key-0004&upload_protocol=x",
              headers={"authorization": "Bearer sk-caller-own-openai-key-0003"}, timeout=30)
    assert recorder.seen[-1].raw_path == "/v1/responses/resp_1/input_items"
    assert recorder.seen[-1].query == "limit=2&order=asc"


@pytest.mark.parametrize("name", ["abc%252F..%252F..%252Fprojects%252Fother-proj", "%2E%2E", "abc%253FpageSize%253D1000",
                                  "abc:generateContent"])
def test_a_cache_name_is_one_segment_decoded_once(stack, name):
    recorder, url, _ = stack
    before = len(recorder.seen)
    for path in (f"/v1beta/cachedContents/{name}", f"{SCOPE}/cachedContents/{name}"):
        answer = httpx.get(url + path, timeout=30)
        assert answer.status_code in (400, 404), (path, answer.text)
    assert len(recorder.seen) == before
    httpx.get(url + f"{SCOPE}/cachedContents/abc123", timeout=30)
    assert recorder.seen[-1].raw_path == f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/cachedContents/abc123"
