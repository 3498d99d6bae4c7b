"""Google's error reported partway through a generateContent stream (an `error` object in an SSE event) reaches a
Gemini caller as a whole-answer error does: Google's code, `status` and `details`, less the gateway's own account
(its key, its project number: docs/security.md)."""

from __future__ import annotations

import json

import httpx
import pytest
from google import genai
from google.genai import errors, types
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from tests.gateway.support_gateway import running_gateway, settings_for
from tests.gateway.support_vertex import gateway_over_stub_vertex, genai_vertex_caller
from tests.support_services import ServerThread

KEY = "AIzaGatewayOwnGeminiKey0000000000"
PROJECT = "123456789012"
RPC = "type.googleapis.com/google.rpc."
CHUNK = {"candidates": [{"content": {"parts": [{"text": "Hel"}], "role": "model"}, "index": 0}],
         "modelVersion": "gemini-2.5-flash"}
# Google's 429 (the shape its quota errors have), sent after the stream began.
ERROR = {"error": {
    "code": 429, "status": "RESOURCE_EXHAUSTED",
    "message": f"Quota exceeded for consumer 'projects/{PROJECT}' (key {KEY}).",
    "details": [
        {"@type": RPC + "ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com",
         "metadata": {"consumer": f"projects/{PROJECT}", "service": "generativelanguage.googleapis.com"}},
        {"@type": RPC + "RetryInfo", "retryDelay": "7s"}]}}


async def _stream(request: Request) -> StreamingResponse:
    async def events():
        yield f"data: {json.dumps(CHUNK)}\r\n\r\n".encode()
        yield f"data: {json.dumps(ERROR)}\r\n\r\n".encode()
    return StreamingResponse(events(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("GEMINI_API_KEY", KEY)
    upstream = Starlette(routes=[Route("/v1beta/models/{target}", _stream, methods=["POST"])])
    try:
        with ServerThread(upstream) as up, running_gateway(settings_for(up.url, tmp_path_factory.mktemp("g"))) as gw:
            yield gw
    finally:
        mp.undo()


def test_a_gemini_caller_gets_googles_status_and_details_scrubbed(gateway):
    client = genai.Client(api_key="AIzaCallerKey000000000000000000",
                          http_options=types.HttpOptions(base_url=gateway.url, api_version="v1beta",
                                                         retry_options=types.HttpRetryOptions(attempts=1)))
    with pytest.raises(errors.ClientError) as refused:
        for _ in client.models.generate_content_stream(model="gemini-2.5-flash", contents="Hi"):
            pass
    err = refused.value
    assert (err.code, err.status) == (429, "RESOURCE_EXHAUSTED")
    assert err.message == "Quota exceeded for consumer 'projects/-' (key ***)."
    assert err.details["error"]["details"] == [
        {"@type": RPC + "ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com",
         "metadata": {"service": "generativelanguage.googleapis.com"}},
        {"@type": RPC + "RetryInfo", "retryDelay": "7s"}]


def test_a_json_array_stream_ends_with_the_same_scrubbed_error(gateway):
    """Without alt=sse a Gemini stream is one JSON array: Google's error is its last element."""
    answer = httpx.post(f"{gateway.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent",
                        headers={"x-goog-api-key": "AIzaCallerKey000000000000000000"},
                        json={"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]})
    error = answer.json()[-1]["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert PROJECT not in answer.text and KEY not in answer.text
    assert error["details"][1] == {"@type": RPC + "RetryInfo", "retryDelay": "7s"}


async def _vertex_stream(request: Request) -> StreamingResponse:
    project = request.path_params["project"]
    refused = {"error": {"code": 403, "status": "PERMISSION_DENIED",
                         "message": f"Project `{project}` is not allowed to use Publisher Model `gemini-3.5-flash`"}}

    async def events():
        yield f"data: {json.dumps(CHUNK)}\r\n\r\n".encode()
        yield f"data: {json.dumps(refused)}\r\n\r\n".encode()
    return StreamingResponse(events(), media_type="text/event-stream")


def test_a_vertex_caller_gets_the_error_without_the_gateways_project(tmp_path, monkeypatch):
    with gateway_over_stub_vertex(monkeypatch, tmp_path, _vertex_stream) as gw:
        client = genai_vertex_caller(gw)
        with pytest.raises(errors.APIError) as refused:
            for _ in client.models.generate_content_stream(model="gemini-3.5-flash", contents="Hi"):
                pass
    assert refused.value.code == 403 and refused.value.status == "PERMISSION_DENIED"
    assert refused.value.message == "Project `***` is not allowed to use Publisher Model `gemini-3.5-flash`"


def test_a_gemini_caller_routed_to_vertex_keeps_googles_status_and_details(tmp_path, monkeypatch):
    """Another Google format upstream (Vertex AI) than the caller's (the Gemini API): the error is re-emitted in
    the caller's format, and was a bare INTERNAL 502 without Google's status and details."""
    policy = {"routes": [{"name": "g", "models": ["gemini-*"], "targets": [{"upstream": "vertex"}]}]}
    with gateway_over_stub_vertex(monkeypatch, tmp_path, _stream, policy) as gw:
        client = genai.Client(api_key="AIzaCallerKey000000000000000000",
                              http_options=types.HttpOptions(base_url=gw, api_version="v1beta"))
        with pytest.raises(errors.ClientError) as refused:
            for _ in client.models.generate_content_stream(model="gemini-3.5-flash", contents="Hi"):
                pass
    assert (refused.value.code, refused.value.status) == (429, "RESOURCE_EXHAUSTED")
    assert refused.value.details["error"]["details"][1] == {"@type": RPC + "RetryInfo", "retryDelay": "7s"}
    assert PROJECT not in json.dumps(refused.value.details)
