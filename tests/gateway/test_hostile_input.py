"""Hostile input is a 4xx in the caller's own shape, never a 500 (issue 29, finding 9): deep tool schemas that
the planner's rewrite would recurse through, integers past Python's conversion limit, raw surrogate bytes, and
deep cachedContents bodies, in every format that takes them."""

from __future__ import annotations

import base64

import httpx
import pytest

from prefixgate.policies import hash_key
from tests.gateway.support_gateway import policy_for, running_gateway, running_upstream, settings_for

KEY = "pg-hostile-key-0123456789"
POLICY = {"routes": [{"name": "all", "models": ["*"], "targets": [{"upstream": "openai"}]},
                     {"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
                     {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
          "keys": [{"name": "team", "key_sha256": hash_key(KEY)}]}
HEADERS = {"authorization": f"Bearer {KEY}", "x-api-key": KEY, "x-goog-api-key": KEY, "content-type": "application/json"}


def deep_schema(depth: int) -> str:
    return '{"type":"object","properties":{"a":' * depth + '{"type":"string"}' + "}}" * depth


def deep_value(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


HUGE = "9" * 5000
# (path, body template with {schema}/{value}, the error shape's marker)
FORMATS = {
    "openai": ("/v1/chat/completions", '{"model":"gpt-5.5","messages":[{"role":"user","content":"hi"}],'
               '"tools":[{"type":"function","function":{"name":"f","parameters":{schema}}}],"seed":{value}}'),
    "anthropic": ("/v1/messages", '{"model":"claude-sonnet-5-5","max_tokens":{value},'
                  '"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{schema}}]}'),
    "responses": ("/v1/responses", '{"model":"gpt-5.5","input":"hi","tools":[{"type":"function","name":"f",'
                  '"parameters":{schema}}],"max_output_tokens":{value}}'),
    "gemini": ("/v1beta/models/gemini-3.5-flash:generateContent", '{"contents":[{"role":"user","parts":[{"text":"hi"}]}],'
               '"tools":[{"functionDeclarations":[{"name":"f","parameters":{schema}}]}],"generationConfig":{"seed":{value}}}'),
}


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    for env in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        mp.setenv(env, "sk-hostile-upstream-0000")
    with running_upstream() as up:
        settings = settings_for(up.url, tmp_path_factory.mktemp("hostile"))
        with running_gateway(settings, policy=policy_for(settings, POLICY)) as server:
            yield server
    mp.undo()


def shaped_4xx(r: httpx.Response) -> None:
    """Refused in the caller's shape, or served (a deep schema is the upstream's to judge); never a 500."""
    assert r.status_code < 500, (r.status_code, r.text[:300])
    assert r.status_code < 400 or r.json()["error"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("what", ["deep schema", "huge integer", "deep value"])
def test_hostile_bodies_are_4xx_in_the_callers_shape(gw, fmt, what):
    path, template = FORMATS[fmt]
    schema = deep_schema(350) if what == "deep schema" else '{"type":"object"}'
    value = HUGE if what == "huge integer" else deep_value(5000) if what == "deep value" else "7"
    shaped_4xx(httpx.post(gw.url + path, content=template.replace("{schema}", schema).replace("{value}", value),
                          headers=HEADERS))


def test_raw_surrogate_bytes_on_gemini_are_a_400(gw):
    body = b'{"contents":[{"role":"user","parts":[{"text":"a\xed\xa0\x80b"}]}]}'
    r = httpx.post(gw.url + "/v1beta/models/gemini-3.5-flash:generateContent", content=body, headers=HEADERS)
    shaped_4xx(r)
    assert r.json()["error"]["status"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_lone_surrogate_in_a_utf16_body_is_a_400(gw, fmt):
    # JSON's reader takes UTF-16 (json.detect_encoding), where the surrogate scans of UTF-8 bytes see nothing.
    path, template = FORMATS[fmt]
    body = template.replace('"hi"', '"a \\ud800 b"').replace("{schema}", deep_schema(1)).replace("{value}", "7")
    r = httpx.post(gw.url + path, content=body.encode("utf-16"), headers=HEADERS)
    assert r.status_code == 400, (r.status_code, r.text[:300])
    assert "surrogate" in str(r.json()["error"])


def test_a_lone_surrogate_in_a_bedrock_count_of_invoke_model_is_a_400(gw):
    # CountTokens carries the InvokeModel body base64-encoded (botocore's model): a body of its own, as hostile.
    inner = b'{"anthropic_version":"bedrock-2023-05-31","max_tokens":9,"messages":[{"role":"user","content":"a \\ud800"}]}'
    body = {"input": {"invokeModel": {"body": base64.b64encode(inner).decode()}}}
    r = httpx.post(gw.url + "/model/us.anthropic.claude-sonnet-5-5/count-tokens", json=body, headers=HEADERS)
    assert r.status_code == 400 and "surrogate" in r.text, (r.status_code, r.text[:300])


@pytest.mark.parametrize("path", ["/v1beta/cachedContents", "/v1/projects/p/locations/us-east5/cachedContents"])
def test_deep_cached_contents_bodies_are_a_400(gw, path):
    body = '{"model":"models/gemini-3.5-flash","contents":' + deep_value(100000) + "}"
    shaped_4xx(httpx.post(gw.url + path, content=body, headers=HEADERS))
