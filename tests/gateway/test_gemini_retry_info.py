"""Gemini and Vertex say how long to wait after a 429 in the body, not in a header: a `google.rpc.RetryInfo`
among the error's `details` with a protobuf Duration (`"retryDelay": "17s"`; the google.rpc error model, as
Gemini's RESOURCE_EXHAUSTED answers carry it). The gateway read only Retry-After headers, so it retried a
Gemini route sooner than asked and told the caller nothing about the wait."""

from __future__ import annotations

import pytest
from google import genai
from google.genai import errors, types
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from prefixgate.gateway.app import create_app
from tests.gateway.support_gateway import policy_for, settings_for
from tests.support_services import ServerThread

DELAYS: list[str] = []


async def exhausted(request) -> JSONResponse:
    return JSONResponse({"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
                                   "status": "RESOURCE_EXHAUSTED", "details": [
                                       {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                                       {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": DELAYS.pop(0)}]}},
                        status_code=429)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("GEMINI_API_KEY", "AIzaRetryInfoKey00000000000000")
    app = Starlette(routes=[Route("/v1beta/models/{model}:generateContent", exhausted, methods=["POST"])])
    try:
        with ServerThread(app) as up:
            settings = settings_for(up.url, tmp_path_factory.mktemp("retry-info"))
            policy = policy_for(settings, {"routes": [{"name": "gemini", "models": ["gemini-*"], "retry": {"attempts": 1},
                                                       "targets": [{"upstream": "gemini"}]}]})
            with ServerThread(create_app(settings, policy=policy)) as gw:
                yield genai.Client(api_key="AIzaCallerKey000000000000000000",
                                   http_options=types.HttpOptions(base_url=gw.url, api_version="v1beta"))
    finally:
        mp.undo()


@pytest.mark.parametrize("delay,told", [("17s", "17"), ("3.957525076s", "4")])
def test_a_gemini_retry_delay_is_the_wait_the_caller_is_told(client, delay, told):
    DELAYS.append(delay)
    with pytest.raises(errors.ClientError) as refused:
        client.models.generate_content(model="gemini-3.5-flash", contents="Hi")
    assert refused.value.code == 429
    assert refused.value.response.headers["retry-after"] == told


@pytest.mark.parametrize("delay", ["soon", "infs", "nans", "17"])
def test_a_retry_delay_that_is_no_wait_asks_for_none(client, delay):
    DELAYS.append(delay)
    with pytest.raises(errors.ClientError) as refused:
        client.models.generate_content(model="gemini-3.5-flash", contents="Hi")
    assert refused.value.code == 429
    assert "retry-after" not in refused.value.response.headers
