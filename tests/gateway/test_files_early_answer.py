"""An upload the provider answers before reading it (no key: a 401; past its size: a 413), closing the connection
as its front end does, reaches the caller as the provider's own error in the caller's format: the gateway stops
sending the body and relays the answer, never a generic 502 (or a 500) for the broken write."""

from __future__ import annotations

import httpx

from tests.gateway.support_gateway import gateway_over_mock

BIG = 40 << 20      # far more than socket buffers hold: the provider answers while most of it is unsent


def test_an_upload_answered_early_gets_the_providers_answer(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)     # open gateway: the caller's (here missing) key goes on
    form = httpx.Request("POST", "http://x/v1/files", files={"file": ("big.txt", b"x" * BIG)},
                         data={"purpose": "user_data"})
    body, kind = form.read(), form.headers["content-type"]
    with gateway_over_mock(tmp_path) as gw:
        for sent in (body, body[:1000]):        # the second on the same gateway: no connection left broken
            answer = httpx.post(f"{gw.url}/v1/files", content=sent, headers={"content-type": kind}, timeout=60)
            assert answer.status_code == 401
            error = answer.json()["error"]
            assert error["type"] == "authentication_error"
            assert "You didn't provide an API key" in error["message"]
