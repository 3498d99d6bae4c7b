"""Web pages cannot drive the gateway (issue 29, finding 8), through a real `prefixgate serve` with no caller keys on
loopback, spending its own OPENAI_API_KEY at `prefixgate mock-providers`: what a browser sends for a page on another
site is refused, what an SDK or curl sends is served."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support_stack import running_stack

CHAT = {"model": "gpt-5.5", "messages": [{"role": "user", "content": "Spend the operator's key."}]}
APP = "https://app.example.com"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    env = {"OPENAI_API_KEY": "sk-gateway-own-0000", "PREFIXGATE_LEDGER_PATH": str(tmp / "ledger.sqlite"),
           "PREFIXGATE_CORS_ORIGINS": json.dumps([APP])}
    with running_stack(tmp, env) as (gw, _):
        yield gw


def chat(gw: str, headers: dict) -> httpx.Response:
    return httpx.post(f"{gw}/v1/chat/completions", content=json.dumps(CHAT), headers=headers)


def test_a_page_on_another_site_is_refused(gateway):
    # What a cross-site fetch(..., {mode: "no-cors", body: JSON}) sends: no preflight, text/plain.
    r = chat(gateway, {"origin": "http://evil.example", "content-type": "text/plain;charset=UTF-8"})
    assert r.status_code == 403 and "cors_origins" in r.json()["error"]["message"]
    assert chat(gateway, {"origin": "null", "content-type": "application/json"}).status_code == 403
    assert httpx.get(f"{gateway}/api/requests", headers={"origin": "http://evil.example"}).status_code == 403


def test_a_page_must_send_json_as_json(gateway):
    own = gateway.replace("http://", "")
    r = chat(gateway, {"origin": f"http://{own}", "content-type": "text/plain"})
    assert r.status_code == 415
    assert chat(gateway, {"origin": f"http://{own}", "content-type": "application/json"}).status_code == 200


def test_a_rebound_host_name_is_refused_by_an_unkeyed_gateway(gateway):
    port = gateway.rsplit(":", 1)[1]
    for path in ("/v1/chat/completions", "/api/requests"):
        r = httpx.request("POST" if "chat" in path else "GET", f"{gateway}{path}", json=CHAT,
                          headers={"host": f"rebind.evil.example:{port}"})
        assert r.status_code == 403, (path, r.text)
    assert httpx.get(f"{gateway}/api/requests", headers={"host": f"localhost:{port}"}).status_code == 200


def test_sdks_and_allowed_pages_are_served(gateway):
    assert chat(gateway, {"content-type": "application/json"}).status_code == 200        # no Origin: not a browser
    r = chat(gateway, {"origin": APP, "content-type": "application/json"})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == APP
    pre = httpx.options(f"{gateway}/v1/chat/completions", headers={
        "origin": APP, "access-control-request-method": "POST", "access-control-request-headers": "authorization"})
    assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == APP
