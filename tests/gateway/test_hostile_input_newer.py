"""Hostile input on the newer surfaces is a 4xx in the caller's own shape naming the field, never a 500
(docs/security.md, "Hostile input"): explicit breakpoints with a TTL that is none, Responses items of the
newer types with wrong-typed fields, Converse blocks of the wrong type, and stored-object ids that no URL
can carry. Each case was a 500 (or a dropped connection) before its fix. The gateway runs in front of
mock-providers, with no caller keys (an open gateway: nothing is refused for ownership first)."""

from __future__ import annotations

import httpx
import pytest

from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.support_services import ServerThread

HEADERS = {"authorization": "Bearer caller-key", "x-api-key": "caller-key", "x-goog-api-key": "caller-key",
           "content-type": "application/json"}
INTERNALS = ("Traceback", 'File "', "site-packages", "Error:", "NoneType")


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    for env, value in (("OPENAI_API_KEY", "sk-newer-openai-000"), ("ANTHROPIC_API_KEY", "sk-ant-newer-000"),
                       ("GEMINI_API_KEY", "newer-gemini-000"), ("AWS_ACCESS_KEY_ID", "AKIDNEWERHOSTILE"),
                       ("AWS_SECRET_ACCESS_KEY", "newer/hostile"), ("AWS_REGION", "us-east-1")):
        mp.setenv(env, value)
    for env in ("AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE"):
        mp.delenv(env, raising=False)
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path_factory.mktemp("newer"), bedrock_base_url=mock.url)
        with running_gateway(settings) as server:
            yield server
    mp.undo()


def refused(r: httpx.Response, shape: str, field: str, status: int = 400) -> None:
    """`status` in the caller's own error shape, naming `field`, with no internals."""
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert not any(mark in r.text for mark in INTERNALS), r.text[:300]
    body = r.json()
    if shape == "openai":
        assert set(body["error"]) >= {"message", "type", "param", "code"}, body
        assert body["error"]["param"] == field, body
        message = body["error"]["message"]
    elif shape == "anthropic":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error", body
        message = body["error"]["message"]
    elif shape == "google":
        assert body["error"]["code"] == status and body["error"]["status"] == "INVALID_ARGUMENT", body
        message = body["error"]["message"]
    elif shape == "interactions":
        assert body["error"]["code"] == "invalid_argument", body
        message = body["error"]["message"]
    else:  # bedrock
        assert r.headers["x-amzn-errortype"].startswith("ValidationException"), r.headers
        message = body["message"]
    assert message.startswith(f"{field}:"), message


def user_part(part: dict) -> list:
    return [{"role": "user", "content": [part]}]


def breakpoint_part(kind: str, ttl: str) -> dict:
    return {"type": kind, "text": "hi", "prompt_cache_breakpoint": {"mode": "explicit", "ttl": ttl}}


def converse(content: list) -> dict:
    return {"messages": [{"role": "user", "content": content}]}


BEDROCK = "/model/us.anthropic.claude-sonnet-5-5"
# (id, path, body, shape, field)
BODIES = [
    # An explicit breakpoint's own ttl that is no TTL reached Checkpoint() unchecked: a ValueError, a 500.
    *[(f"responses breakpoint ttl {ttl!r}", "/v1/responses",
       {"model": "gpt-5.6-sol", "input": user_part(breakpoint_part("input_text", ttl))},
       "openai", "input.0.content.0.prompt_cache_breakpoint.ttl") for ttl in ("7d", "")],
    *[(f"chat breakpoint ttl {ttl!r}", "/v1/chat/completions",
       {"model": "gpt-5.6-sol", "messages": user_part(breakpoint_part("text", ttl))},
       "openai", "messages.0.content.0.prompt_cache_breakpoint.ttl") for ttl in ("7d", "")],
    ("responses input_tokens breakpoint ttl", "/v1/responses/input_tokens",
     {"model": "gpt-5.6-sol", "input": user_part(breakpoint_part("input_text", "7d"))},
     "openai", "input.0.content.0.prompt_cache_breakpoint.ttl"),
    # A reasoning item's summary text that is not a string was joined unchecked: a TypeError, a 500.
    ("responses reasoning summary text", "/v1/responses",
     {"model": "gpt-5.6-sol", "input": [{"type": "reasoning", "summary": [{"type": "summary_text", "text": 5}]}]},
     "openai", "input.0.summary.0.text"),
    ("responses reasoning summary not a list", "/v1/responses",
     {"model": "gpt-5.6-sol", "input": [{"type": "reasoning", "summary": {"text": "x"}}]}, "openai", "input.0.summary"),
    # A Claude-style cache_control ttl that is no TTL on a Chat or Responses part became a checkpoint unchecked when
    # the route's target was Claude or Gemini (translated): a ValueError or AttributeError, a 500.
    *[(f"{api} cache_control ttl {ttl!r} to {model}", path, body(model, {**part, "cache_control": {"type": "ephemeral", "ttl": ttl}}),
       "openai", f"{where}.0.content.0.cache_control.ttl")
      for api, path, where, part, body in (
          ("chat", "/v1/chat/completions", "messages", {"type": "text", "text": "hi"},
           lambda m, p: {"model": m, "messages": user_part(p)}),
          ("responses", "/v1/responses", "input", {"type": "input_text", "text": "hi"},
           lambda m, p: {"model": m, "input": user_part(p)}))
      for model in ("claude-sonnet-5-5", "gemini-3.5-flash") for ttl in ("7d", 5)],
    # Tool-call arguments that are not a JSON string were parsed unchecked when translated for a Claude or Gemini
    # target: a TypeError, a 500.
    *[(f"responses function_call arguments {args!r} to {model}", "/v1/responses",
       {"model": model, "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": args}]},
       "openai", "input.0.arguments") for model in ("claude-sonnet-5-5", "gemini-3.5-flash") for args in (5, {"a": 1})],
    *[(f"chat tool_calls arguments to {model}", "/v1/chat/completions",
       {"model": model, "messages": [{"role": "assistant", "tool_calls": [
           {"id": "c", "type": "function", "function": {"name": "f", "arguments": 5}}]},
           {"role": "tool", "tool_call_id": "c", "content": "r"}]},
       "openai", "messages.0.tool_calls.0.function.arguments") for model in ("claude-sonnet-5-5", "gemini-3.5-flash")],
    ("chat tool_calls function not an object", "/v1/chat/completions",
     {"model": "claude-sonnet-5-5", "messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": "f"}]},
                                                 {"role": "tool", "tool_call_id": "c", "content": "r"}]},
     "openai", "messages.0.tool_calls.0.function"),
    # Converse: a toolResult's content that is not a list, and a guardContent text that is not a string, were
    # iterated or counted unchecked: a TypeError, a 500 (the event-stream operation too).
    *[(f"{op} toolResult content", f"{BEDROCK}/{op}", converse([{"toolResult": {"toolUseId": "t", "content": 5}}]),
       "bedrock", "messages.0.content.0.toolResult.content") for op in ("converse", "converse-stream")],
    *[(f"{op} guardContent text", f"{BEDROCK}/{op}", converse([{"guardContent": {"text": {"text": 5}}}]),
       "bedrock", "messages.0.content.0.guardContent.text.text") for op in ("converse", "converse-stream")],
    # Interactions: generation_config's numbers went upstream unchecked (the mock, like a strict server, failed on
    # a string where an integer belongs: a 500 relayed), and into translations as they came.
    *[(f"interactions generation_config.{name} {value!r}", "/v1beta/interactions",
       {"model": "gemini-3.5-flash", "input": "hi", "generation_config": {name: value}},
       "interactions", f"generation_config.{name}")
      for name, value in (("max_output_tokens", "10"), ("max_output_tokens", True), ("temperature", "hot"),
                          ("stop_sequences", "END"))],
    # Chat: a stream_options that is not an object was read for its include_usage: an AttributeError, a 500.
    ("chat stream_options not an object", "/v1/chat/completions",
     {"model": "gpt-5.6-sol", "stream": True, "stream_options": "yes", "messages": [{"role": "user", "content": "hi"}]},
     "openai", "stream_options"),
    ("interactions generation_config.stop_sequences item", "/v1beta/interactions",
     {"model": "gemini-3.5-flash", "input": "hi", "generation_config": {"stop_sequences": [5]}},
     "interactions", "generation_config.stop_sequences.0"),
]


@pytest.mark.parametrize("path,body,shape,field", [case[1:] for case in BODIES], ids=[case[0] for case in BODIES])
def test_bad_bodies_on_the_newer_surfaces_are_400s_naming_the_field(gw, path, body, shape, field):
    refused(httpx.post(gw.url + path, json=body, headers=HEADERS, timeout=30), shape, field)


def test_still_serving_afterwards(gw):
    r = httpx.post(gw.url + "/v1/chat/completions", headers=HEADERS, timeout=30,
                   json={"model": "gpt-5.4", "messages": [{"role": "user", "content": "still there?"}]})
    assert r.status_code == 200, r.text[:300]


# A stored object's id went into the upstream request line as decoded: a non-Latin-1 character (`%ff`, a
# right-to-left mark) was a 500 that dropped the caller's connection; CR LF and spaces reached the upstream's
# request line. Now a 400 naming the id, before anything is sent.
ODD_IDS = ["%ff", "%E2%80%AE", "a%0d%0ab", "a%20b", "a%00b"]
STORED = [("openai", "GET", "/v1/responses/{id}", "response_id"),
          ("openai", "DELETE", "/v1/responses/{id}", "response_id"),
          ("openai", "GET", "/v1/responses/{id}/input_items", "response_id"),
          ("openai", "POST", "/v1/responses/{id}/cancel", "response_id"),
          ("interactions", "GET", "/v1beta/interactions/{id}", "interaction_id"),
          ("interactions", "DELETE", "/v1beta/interactions/{id}", "interaction_id"),
          ("interactions", "POST", "/v1beta/interactions/{id}/cancel", "interaction_id")]


@pytest.mark.parametrize("shape,method,path,field", STORED, ids=[f"{m} {p}" for _, m, p, _ in STORED])
def test_stored_object_ids_no_url_can_carry_are_400s(gw, shape, method, path, field):
    with httpx.Client(base_url=gw.url, headers=HEADERS, timeout=30) as client:
        for odd in ODD_IDS:
            r = client.request(method, path.replace("{id}", odd), content=b"{}" if method == "POST" else None)
            refused(r, shape, field)
        # The same connection still serves (a crash here used to drop it).
        assert client.get("/v1/models").status_code == 200
