"""Bad bodies raise one typed RequestError naming the field, rendered in each dialect's error shape,
and the real SDKs turn that shape into their own exception with our message."""

from __future__ import annotations

import anthropic
import openai
import pytest
from google.genai import errors as genai_errors

from prefixgate.dialects import anthropic as an
from prefixgate.dialects import gemini as ge
from prefixgate.dialects import openai as oa
from prefixgate.errors import RequestError, error_body
from tests.core.support_sdk_capture import Capture, anthropic_client, gemini_client, openai_client

CASES = [
    (an, b"{not json", None),
    (an, b"[1, 2]", None),
    (an, {"max_tokens": 5, "messages": []}, "model"),
    (an, {"model": "m", "messages": []}, "max_tokens"),
    (an, {"model": "m", "max_tokens": -1, "messages": []}, "max_tokens"),
    (an, {"model": "m", "max_tokens": True, "messages": []}, "max_tokens"),
    (an, {"model": "m", "max_tokens": 1, "messages": "hi"}, "messages"),
    (an, {"model": "m", "max_tokens": 1, "messages": []}, "messages"),
    (an, {"model": "m", "max_tokens": 1, "messages": [{"role": "developer", "content": "x"}]}, "messages.0.role"),
    (an, {"model": "m", "max_tokens": 1, "messages": [{"role": "user"}]}, "messages.0.content"),
    (an, {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"text": "x"}]}]}, "messages.0.content.0.type"),
    (an, {"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": 3600}}]}]}, "messages.0.content.0.cache_control.ttl"),
    (an, {"model": "m", "max_tokens": 1, "system": 5, "messages": []}, "system"),
    (an, {"model": "m", "max_tokens": 1, "tools": [1], "messages": []}, "tools.0"),
    # Not JSON numbers (Python's json reads them; orjson would send them on as null): refused, not changed.
    (an, b'{"model":"m","max_tokens":1,"temperature":NaN,"messages":[{"role":"user","content":"x"}]}', None),
    (an, b'{"model":"m","max_tokens":1,"top_p":-Infinity,"messages":[{"role":"user","content":"x"}]}', None),
    (oa, b'{"model":"m","temperature":1e400,"messages":[{"role":"user","content":"x"}]}', None),
    (oa, b"", None),
    (oa, {"model": "m", "messages": []}, "messages"),
    (oa, {"messages": [{"role": "user", "content": "x"}]}, "model"),
    (oa, {"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
    (oa, {"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
    (oa, {"model": "m", "messages": [{"role": "user", "content": None}]}, "messages.0.content"),
    (oa, {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
    (oa, {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "stream"),
    (oa, {"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": "json"}, "response_format"),
    (oa, {"model": "m", "messages": [{"role": "user", "content": "x"}],
          "tools": [{"type": "function", "function": True}]}, "tools.0.function"),
    (ge, {"contents": []}, "contents"),
    (ge, {}, "contents"),
    (ge, {"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}, "contents.0.role"),
    (ge, {"contents": [{"role": "user", "parts": [{"text": 5}]}]}, "contents.0.parts.0.text"),
    (ge, {"contents": [{"role": "user", "parts": "x"}]}, "contents.0.parts"),
]


@pytest.mark.parametrize(("module", "body", "field"), CASES)
def test_bad_body_names_the_field(module, body, field):
    with pytest.raises(RequestError) as info:
        module.parse_request(body)
    err = info.value
    assert err.status == 400 and err.field == field
    if field:
        assert field in err.message
    shape = error_body(err, module.__name__.rsplit(".", 1)[-1])
    assert err.message in str(shape)


def test_error_shapes():
    err = RequestError("messages.0.role: bad", field="messages.0.role")
    assert error_body(err, "openai") == {"error": {"message": "messages.0.role: bad", "type": "invalid_request_error",
                                                   "param": "messages.0.role", "code": None}}
    assert error_body(err, "anthropic") == {"type": "error", "error": {"type": "invalid_request_error", "message": "messages.0.role: bad"}}
    assert error_body(err, "gemini") == {"error": {"code": 400, "message": "messages.0.role: bad", "status": "INVALID_ARGUMENT"}}
    over = RequestError("busy", status=529, kind="overloaded")
    assert error_body(over, "anthropic")["error"]["type"] == "overloaded_error"


def test_sdks_raise_their_own_errors_from_our_shapes():
    err = RequestError("messages.0.role: must be one of user, assistant", field="messages.0.role")
    cap = Capture(error=(400, error_body(err, "anthropic")))
    with pytest.raises(anthropic.BadRequestError, match="must be one of"):
        anthropic_client(cap).messages.create(model="m", max_tokens=1, messages=[{"role": "user", "content": "x"}])
    cap = Capture(error=(400, error_body(err, "openai")))
    with pytest.raises(openai.BadRequestError) as info:
        openai_client(cap).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert info.value.param == "messages.0.role"
    cap = Capture(error=(429, error_body(RequestError("slow down", status=429, kind="rate_limit"), "gemini")))
    with pytest.raises(genai_errors.ClientError) as ginfo:
        gemini_client(cap).models.generate_content(model="gemini-3.5-flash", contents="x")
    assert ginfo.value.code == 429 and ginfo.value.status == "RESOURCE_EXHAUSTED"
