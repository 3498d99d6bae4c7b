"""A body naming one key twice in an object, sent as raw bytes (no SDK can send one) through a keyed gateway in front
of the mock providers, in each format: a 400 in that format naming the key, and the upstream never called. The
gateway's parser keeps the last of two same-named keys; an upstream's may keep the first, so the gateway would check
one value (a file, a model, a stored response, a cache's expiry) while the provider ran the other. RFC 8259 says an
object's names SHOULD be unique, I-JSON (RFC 7493) that they MUST, and protobuf's JSON parser refuses a field set
twice. The same body with the key once is answered (200), so each refusal is the gateway's, at the path counted."""

from __future__ import annotations

import copy
import functools
import io
import json
import time
from typing import Any

import httpx
import pytest

from prefixgate.policies import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import Counted, policy_for, running_gateway, settings_for
from tests.gateway.support_sdk_clients import gemini
from tests.gateway.support_vertex import LOCATION, PROJECT, STATIC_TOKEN
from tests.support_services import ServerThread

ACME, BETA = "pg-twice-acme-0123456789", "pg-twice-beta-0123456789"
BEDROCK = "us.anthropic.claude-sonnet-5-5"
VERTEX = f"/v1/projects/caller-project/locations/{LOCATION}/publishers/google/models/gemini-3.8-flash"
REPORT = b"Q3 revenue by region, confidential: " + b"north 4.1M, south 2.7M, east 3.3M. " * 40


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    env = pytest.MonkeyPatch()
    for name, value in {"OPENAI_API_KEY": "sk-gateway-own-0000", "ANTHROPIC_API_KEY": "sk-ant-gateway-own-0000",
                        "GEMINI_API_KEY": "AIzaGatewayOwnKey0000000000000", "GOOGLE_CLOUD_PROJECT": PROJECT,
                        "GOOGLE_CLOUD_LOCATION": LOCATION, "PREFIXGATE_VERTEX_ACCESS_TOKEN": STATIC_TOKEN,
                        "AWS_ACCESS_KEY_ID": "AKIDGATEWAYBEDROCK", "AWS_SECRET_ACCESS_KEY": "gateway/bedrock+secret",
                        "AWS_REGION": "us-east-1"}.items():
        env.setenv(name, value)
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "PREFIXGATE_VERTEX_BASE_URL", "AWS_SESSION_TOKEN",
                 "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE"):
        env.delenv(name, raising=False)
    mock = Counted(mock_app(MockContext()))
    try:
        with ServerThread(mock) as server:
            settings = settings_for(server.url, tmp_path_factory.mktemp("twice"), vertex_base_url=server.url,
                                    bedrock_base_url=server.url)
            policy = policy_for(settings, {
                "routes": [{"name": "gpt", "models": ["gpt-5.4"], "targets": [{"upstream": "openai"}]},
                           {"name": "claude", "models": ["claude-sonnet-5-5"], "targets": [{"upstream": "anthropic"}]},
                           {"name": "vertex", "models": ["gemini-3.8-flash"], "targets": [{"upstream": "vertex"}]},
                           {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]},
                           {"name": "bedrock", "models": ["us.anthropic.*"], "targets": [{"upstream": "bedrock"}]}],
                "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme"},
                         {"name": "beta", "key_sha256": hash_key(BETA), "tenant": "beta"}]})
            with running_gateway(settings, policy=policy) as gw:
                yield gw.url, mock
    finally:
        env.undo()


def twice(body: dict, at: tuple, key: str, first: Any) -> str:
    """`body` as JSON with `key` of its object at path `at` written twice: first `first`, then the body's own value
    (which Python's parser keeps, and the gateway checks)."""
    body = copy.deepcopy(body)
    node = functools.reduce(lambda n, step: n[step], at, body)
    items = list(node.items())
    node.clear()
    for name, value in items:
        if name == key:
            node["\0first"] = first
        node[name] = value
    return json.dumps(body).replace('"\\u0000first"', json.dumps(key))


def _field(at: tuple, key: str) -> str:
    return ".".join(str(step) for step in (*at, key))


USER = [{"role": "user", "content": "Hi"}]
ASKED = {"model": "models/gemini-3.5-flash", "contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
GEMINI = "/v1beta/models/gemini-3.5-flash"
VERTEX_UP = f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/gemini-3.8-flash"
# (format, gateway path, a body, the object and key written twice in it, the first value, the upstream path asked).
# Each key is one the gateway reads, and an upstream keeping the first value would run something else.
CASES = [
    # Admitted and priced as gpt-5.4, served as another model.
    ("openai", "/v1/chat/completions", {"model": "gpt-5.4", "messages": USER}, (), "model", "gpt-5.5-pro",
     "/v1/chat/completions"),
    # Another tenant's stored response, checked as none.
    ("openai", "/v1/responses", {"model": "gpt-5.4", "input": "Go on.", "previous_response_id": None}, (),
     "previous_response_id", "resp_of_acme", "/v1/responses"),
    ("anthropic", "/v1/messages", {"model": "claude-sonnet-5-5", "max_tokens": 16,
                                   "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]},
     ("messages", 0, "content", 0), "text", "Hi", "/v1/messages"),
    # Another tenant's cache, in a count forwarded as it came (the count tells its size).
    ("gemini", f"{GEMINI}:countTokens", {"generateContentRequest": ASKED}, (), "generateContentRequest",
     {**ASKED, "cachedContent": "cachedContents/of-acme"}, f"{GEMINI}:countTokens"),
    # Vertex's model router, checked as absent.
    ("gemini", f"{VERTEX}:generateContent", {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}],
                                             "generationConfig": {"routingConfig": None}},
     ("generationConfig",), "routingConfig", {"manualMode": {"modelName": "gemini-3.8-pro"}},
     f"{VERTEX_UP}:generateContent"),
    ("bedrock", f"/model/{BEDROCK}/converse", {"messages": [{"role": "user", "content": [{"text": "Hi"}]}],
                                               "inferenceConfig": {"maxTokens": 16}},
     ("inferenceConfig",), "maxTokens", 64000, f"/model/{BEDROCK}/converse"),
    ("bedrock", f"/model/{BEDROCK}/invoke", {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 16,
                                             "messages": USER}, (), "max_tokens", 64000, f"/model/{BEDROCK}/invoke"),
]


def _post(gw: str, path: str, body: str | bytes, key: str = BETA) -> httpx.Response:
    return httpx.post(gw + path, content=body, timeout=30,
                      headers={"authorization": f"Bearer {key}", "content-type": "application/json"})


def _refused_in_format(answer: httpx.Response, form: str, field: str) -> None:
    assert answer.status_code == 400, answer.text
    data = answer.json()
    message = {"openai": lambda: data["error"]["message"], "bedrock": lambda: data["message"],
               "anthropic": lambda: data["error"]["message"], "gemini": lambda: data["error"]["message"]}[form]()
    assert f"({field})" in message and "twice" in message, data
    if form == "openai":
        assert data["error"]["type"] == "invalid_request_error" and data["error"]["param"] == field, data
    elif form == "anthropic":
        assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error", data
    elif form == "gemini":
        assert data["error"]["status"] == "INVALID_ARGUMENT", data
    else:       # Bedrock's runtime: the exception's name in a header, its message in the body
        assert answer.headers["x-amzn-errortype"].startswith("ValidationException"), answer.headers


@pytest.mark.parametrize(("form", "path", "body", "at", "key", "first", "upstream"), CASES,
                         ids=[f"{c[0]}{c[1].rsplit('/', 1)[-1]}" for c in CASES])
def test_a_key_written_twice_is_refused_in_the_callers_format(stack, form, path, body, at, key, first, upstream):
    gw, mock = stack
    answered = _post(gw, path, json.dumps(body))
    assert answered.status_code == 200, answered.text
    asked = mock.paths.count(upstream)
    assert asked >= 1, mock.paths[-5:]
    _refused_in_format(_post(gw, path, twice(body, at, key, first)), form, _field(at, key))
    assert mock.paths.count(upstream) == asked


def test_a_file_of_another_tenant_named_in_a_repeated_key_is_refused(stack):
    # Python keeps the last `fileData` (a public URL, anyone's) and the gateway checked it; an upstream keeping the
    # first would read acme's upload with the gateway's key, for beta.
    gw, mock = stack
    acme = gemini(gw, ACME)     # held while used: the SDK closes its HTTP client when a Client is collected
    made = acme.files.upload(file=io.BytesIO(REPORT), config={"mime_type": "text/plain", "display_name": "q3"})
    public = {"fileUri": "https://www.example.com/brochure.txt", "mimeType": "text/plain"}
    body = {"contents": [{"role": "user", "parts": [{"text": "Summarise this."}, {"fileData": public}]}]}
    sent = twice(body, ("contents", 0, "parts", 1), "fileData", {"fileUri": made.uri, "mimeType": "text/plain"})
    asked = len(mock.paths)
    for action in ("generateContent", "countTokens"):
        answer = _post(gw, f"{GEMINI}:{action}", sent)
        _refused_in_format(answer, "gemini", "contents.0.parts.1.fileData")
        assert "north 4.1M" not in answer.text
    assert len(mock.paths) == asked, mock.paths[asked:]
    # Its owner names it once and is answered.
    body["contents"][0]["parts"][1]["fileData"] = {"fileUri": made.uri, "mimeType": "text/plain"}
    own = _post(gw, f"{GEMINI}:generateContent", json.dumps(body), key=ACME)
    assert own.status_code == 200, own.text


def test_a_cache_lifetime_written_twice_is_refused(stack):
    # max_cache_ttl_s capped the last `expireTime` (an hour away); an upstream keeping the first would store the
    # cache a month, which the operator pays by the hour.
    gw, mock = stack
    hour, month = (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + s)) for s in (3600, 30 * 86400))
    body = {"model": "models/gemini-3.5-flash", "contents": [{"role": "user", "parts": [{"text": "The contract. " * 2000}]}],
            "expireTime": hour}
    asked = len(mock.paths)
    _refused_in_format(_post(gw, "/v1beta/cachedContents", twice(body, (), "expireTime", month)), "gemini", "expireTime")
    assert len(mock.paths) == asked, mock.paths[asked:]


def test_a_repeated_key_in_a_resent_bodys_new_message_is_refused(stack):
    # An agent's next request resends the last one's bytes and the gateway parses only what is new
    # (dialects/resent.py): the repeated key there is found all the same, and the refused body is not taken up by
    # the next request as checked.
    gw, mock = stack
    history = [json.dumps({"role": r, "content": f"Turn {i}: " + "the build log, line by line. " * 40})
               for i, r in enumerate(["user", "assistant"] * 20)]
    head = '{"model": "claude-sonnet-5-5", "max_tokens": 16, "messages": [' + ", ".join(history)
    first = _post(gw, "/v1/messages", head[:head.rindex(', {"role": "assistant"')] + "]}")
    assert first.status_code == 200, first.text
    asked = mock.paths.count("/v1/messages")
    twice = head + ', {"role": "user", "content": [{"type": "text", "text": "Run it.", "type": "document"}]}]}'
    _refused_in_format(_post(gw, "/v1/messages", twice), "anthropic", "messages.40.content.0.type")
    again = twice.replace('"text": "Run it.", "type": "document"', '"text": "Run it."')
    assert _post(gw, "/v1/messages", again).status_code == 200
    _refused_in_format(_post(gw, "/v1/messages", twice), "anthropic", "messages.40.content.0.type")
    assert mock.paths.count("/v1/messages") == asked + 1
